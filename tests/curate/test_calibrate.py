"""`curate calibrate` on a labelled sample of real voices over real music (tests/music/mixes.py:
Debian's recordings), split by source: it chooses max_music_prob, min_snr_db, min_dnsmos_ovrl
and the tier edges on one part, reports each drop's precision and recall on the other, and
writes a curate: block a further --configfile reads."""

import json

import numpy as np
import pytest
import soundfile as sf
import yaml

from speechprep.core.config import defaults, merge
from speechprep.curate import calibrate
from speechprep.errors import UsageError
from tests.music import mixes as M
from tests.support import REPO


@pytest.fixture(scope="module")
def manifest(tmp_path_factory):
    """Each mix as a file: its non-speech either side (1 s), the segment between (a line
    with offset and duration); clean speech labelled keep, 10 and 0 dB background_music."""
    d = tmp_path_factory.mktemp("labelled")
    lines = []
    for split in ("calibration", "held_out"):
        for k, m in enumerate(M.mixes(split, per_source=1, snrs=(None, 10.0, 0.0), seed=3)):
            before, after = (m.noise + (np.zeros(0, np.float32),) * 2)[:2] if m.noise else (np.zeros(0),) * 2
            path = d / f"{split}_{k:03d}.wav"
            sf.write(path, np.concatenate([before, m.audio, after]).astype(np.float32), m.sr, subtype="FLOAT")
            lines.append(
                {
                    "audio_filepath": str(path),
                    "offset": len(before) / m.sr,
                    "duration": m.seconds,
                    "label": "keep" if m.snr is None else "background_music",
                    "source": m.speech,
                }
            )
    lines.append({"audio_filepath": str(d / "absent.wav"), "label": "keep", "source": "librivox"})
    path = d / "labelled.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    return path


def test_thresholds_are_chosen_on_one_part_and_reported_on_the_other(manifest, tmp_path, capsys):
    out = tmp_path / "block.yaml"
    result = calibrate.run([], str(manifest), str(out))
    assert result["split"] == "source" and sum(result["skipped"].values()) == 1  # the absent file, counted
    cal, rep = result["groups"]
    assert cal and rep and not set(cal) & set(rep)  # whole sources, never clips, on each side
    chosen = result["chosen"]
    assert 0.0 < chosen["max_music_prob"] < 1.0
    assert 1.0 <= chosen["tier_standard"] <= chosen["tier_premium"] <= 5.0
    # no clip labelled low_snr or low_quality: those keep the configured values, and say so
    cfg = defaults(REPO / "config" / "config.yaml")["curate"]
    assert chosen["min_snr_db"] == cfg["min_snr_db"] and result["notes"]["min_snr_db"]["kept_configured"]
    r = result["report"]
    assert r["background_music"]["precision"] >= 0.8 and r["background_music"]["recall"] >= 0.8, r
    assert r["keep_kept"] >= 0.8, r
    assert set(result["by_source"]) == set(rep)
    text = out.read_text(encoding="utf-8")
    assert "# report part, not chosen on" in text and "precision" in text
    block = yaml.safe_load(text)
    assert block["curate"]["max_music_prob"] == chosen["max_music_prob"]
    merged = merge(defaults(REPO / "config" / "config.yaml"), block)
    assert merged["curate"]["tier_premium"] == chosen["tier_premium"]
    assert "report part" in capsys.readouterr().out


def test_a_sample_without_labels_is_refused(tmp_path):
    m = tmp_path / "m.jsonl"
    m.write_text(json.dumps({"audio_filepath": "/x.wav"}) + "\n", encoding="utf-8")
    with pytest.raises(UsageError, match="lack audio_filepath or label"):
        calibrate.run([], str(m), str(tmp_path / "b.yaml"))
    assert not (tmp_path / "b.yaml").exists()
