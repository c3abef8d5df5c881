"""The annotations page: distributions with the bin edges, caption counts, and the extremes
to listen to next to their captions."""

import json
import re

from speechprep.report import annotations as ar
from tests import real_speech as R


def dataset(tmp_path):
    """A dataset's TTS manifests over real recordings (the LibriVox reader's), its stats.json
    and curation's summary.json."""
    res = tmp_path / "results" / "ds"
    (res / "tts").mkdir(parents=True)
    (res / "curate").mkdir()
    lines = []
    for i, u in enumerate(R.librivox() + R.cards()):
        lines.append(
            {
                "id": f"seg{i}",
                "audio_filepath": str(u.path),
                "offset": 0.0,
                "duration": 1.5,
                "text": u.text,
                "phonemes": f"ph{i}",
                "pitch_mean": 90.0 + 3 * i,
                "pitch_std": 10.0 + i,
                "monotony": 1.0 + 0.1 * i,
                "reverb": 0.2 + 0.05 * i,
                "snr_db": 30.0 - i,
                "speaking_rate": 10.0 + (i % 4),
                "description": "A speaker speaks fast." if i % 2 else "A speaker speaks slowly.",
            }
        )
    lines[0]["description"] = None  # no caption: counted
    for split, part in (("train", lines[:8]), ("val", lines[8:])):
        (res / "tts" / f"{split}_manifest.jsonl").write_text(
            "".join(json.dumps(x) + "\n" for x in part), encoding="utf-8"
        )
    captions = {"bins": 3, "edges": {"speaking_rate": [11.0, 12.0]}, "counts": {"described": 9, "no_pitch": 1}}
    stats = {"speaking_rate_unit": "phonemes/s", "captions": captions}
    (res / "tts" / "stats.json").write_text(json.dumps(stats), encoding="utf-8")
    summary = {"annotations": {"bins": 3, "edges": {"pitch_mean": [95.0, 105.0], "reverb": [0.3, 0.5]}}}
    (res / "curate" / "summary.json").write_text(json.dumps(summary), encoding="utf-8")
    return res, lines


def test_page_plays_the_extremes_next_to_their_captions(tmp_path):
    res, lines = dataset(tmp_path)
    written = ar.make(res, tmp_path / "report")
    assert [p.name for p in written] == ["annotations.png", "annotations.html"]
    assert written[0].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and written[0].stat().st_size > 5000
    page = written[1].read_text(encoding="utf-8")
    # pitch, speaking rate and reverberation: the 2 lowest and the 2 highest each, playable
    assert len(re.findall(r'<audio [^>]*><source src="data:audio/flac;base64,', page)) == 3 * 2 * 2
    lowest_pitch = page.split("the lowest pitch_mean")[1].split("<h3")[0]
    assert "<td>seg0</td>" in lowest_pitch and "<td>seg1</td>" in lowest_pitch and "<td>ph1</td>" in lowest_pitch
    highest_reverb = page.split("the highest reverb")[1].split("<h3")[0]
    assert f"<td>seg{len(lines) - 1}</td>" in highest_reverb
    assert "<td>A speaker speaks fast.</td>" in page and "<td>no_pitch</td><td>1</td>" in page
    assert "<td>described</td><td>9</td>" in page and "phonemes/s" in page
