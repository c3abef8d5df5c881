"""Small copies of published corpus layouts, built from real recordings with their real text.

The voices: the LibriVox reader and the cards speaker of pocketsphinx-testdata (16 kHz, with
their transcripts; BSD-2-Clause) and the ALSA voice naming loudspeaker positions (alsa-utils,
48 kHz, GPL-2; its text is what each file's name says it says: ``Front_Left.wav``, "front
left"). :mod:`tests.real_speech` fetches them from Debian's archive.

* :func:`librispeech`: ``<part>/<speaker>/<chapter>/<speaker>-<chapter>-<nnnn>.flac`` with
  ``<speaker>-<chapter>.trans.txt`` (upper-case text), as OpenSLR publishes it;
* :func:`libritts`: ``<part>/<speaker>/<chapter>/<speaker>_<chapter>_<nnnnnn>_000000.wav``
  with ``.trans.tsv`` (original and normalised text), ``.book.tsv`` and ``SPEAKERS.txt``;
* :func:`vctk`: ``wav48/p<nnn>/p<nnn>_<nnn>.wav``, ``txt/p<nnn>/p<nnn>_<nnn>.txt`` and
  ``speaker-info.txt`` (VCTK 0.80's layout);
* :func:`lhotse_manifests`: a RecordingSet, a SupervisionSet and a CutSet of them written by
  Lhotse's own API, a two-channel recording among them;
* :func:`hf_saved`: a ``datasets`` DatasetDict saved by ``save_to_disk``.
"""

from __future__ import annotations

import io
import json
import sys
from dataclasses import dataclass
from pathlib import Path

import soundfile as sf

from tests import real_speech


@dataclass(frozen=True)
class Voice:
    """A real voice as a corpus numbers it."""

    number: str
    gender: str
    utterances: list  # real_speech.Utterance with text


def alsa_with_text() -> list:
    return [
        real_speech.Utterance(u.path, u.speaker, " ".join(u.path.stem.lower().split("_")))
        for u in real_speech.alsa_voice()
    ]


def voices() -> list[Voice]:
    """Three real people with their text: the LibriVox reader (female), the cards speaker and
    the ALSA voice (as their corpora would number them)."""
    return [
        Voice("1001", "F", real_speech.librivox()),
        Voice("1002", "M", real_speech.cards()),
        Voice("1003", "F", alsa_with_text()[:4]),
    ]


def _pcm(u) -> tuple:
    x, sr = real_speech.read(u.path)
    return x, sr


def librispeech(root: Path, part: str = "dev-clean", voices_: list[Voice] | None = None) -> dict[str, dict]:
    """A LibriSpeech part under ``root``; returns each utterance's truth by id."""
    truth = {}
    for v in voices_ or voices():
        chapter = f"{int(v.number) * 10}"
        d = root / part / v.number / chapter
        d.mkdir(parents=True, exist_ok=True)
        lines = []
        for k, u in enumerate(v.utterances):
            uid = f"{v.number}-{chapter}-{k:04d}"
            x, sr = _pcm(u)
            sf.write(d / f"{uid}.flac", x, sr, subtype="PCM_16")
            text = u.text.upper()
            lines.append(f"{uid} {text}\n")
            truth[uid] = {"text": text, "speaker": v.number, "duration": len(x) / sr}
        (d / f"{v.number}-{chapter}.trans.txt").write_text("".join(lines), encoding="utf-8")
    return truth


def libritts(root: Path, part: str = "dev-clean", voices_: list[Voice] | None = None) -> dict[str, dict]:
    """A LibriTTS part under ``root`` (with ``SPEAKERS.txt``); returns each utterance's truth by id."""
    truth = {}
    speakers = [";ID  |SEX| SUBSET           |MINUTES| NAME"]
    for v in voices_ or voices():
        chapter = f"{int(v.number) * 7}"
        d = root / part / v.number / chapter
        d.mkdir(parents=True, exist_ok=True)
        trans, book = [], []
        for k, u in enumerate(v.utterances):
            uid = f"{v.number}_{chapter}_{k:06d}_000000"
            x, sr = _pcm(u)
            sf.write(d / f"{uid}.wav", x, sr, subtype="PCM_16")
            original = u.text[0].upper() + u.text[1:] + "."
            trans.append(f"{uid}\t{original}\t{original}\n")
            book.append(f"{uid}\t{original}\t{original}\t0.0\t{len(x) / sr:.2f}\t30.5\n")
            truth[uid] = {"text": original, "speaker": v.number, "gender": v.gender, "duration": len(x) / sr}
        (d / f"{v.number}_{chapter}.trans.tsv").write_text("".join(trans), encoding="utf-8")
        (d / f"{v.number}_{chapter}.book.tsv").write_text("".join(book), encoding="utf-8")
        speakers.append(f"{v.number:<5}| {v.gender} | {part:<16} | 1.00  | Reader {v.number}")
    (root / "SPEAKERS.txt").write_text("\n".join(speakers) + "\n", encoding="utf-8")
    return truth


def vctk(root: Path, voices_: list[Voice] | None = None) -> dict[str, dict]:
    """VCTK's layout under ``root`` (speakers ``p<nnn>``); returns each utterance's truth by id."""
    truth = {}
    info = ["ID  AGE  GENDER  ACCENTS  REGION"]
    for v in voices_ or voices():
        spk = f"p{int(v.number) - 700}"
        for k, u in enumerate(v.utterances, 1):
            uid = f"{spk}_{k:03d}"
            for sub in ("wav48", "txt"):
                (root / sub / spk).mkdir(parents=True, exist_ok=True)
            x, sr = _pcm(u)
            sf.write(root / "wav48" / spk / f"{uid}.wav", x, sr, subtype="PCM_16")
            text = u.text[0].upper() + u.text[1:] + "."
            (root / "txt" / spk / f"{uid}.txt").write_text(text + "\n", encoding="utf-8")
            truth[uid] = {"text": text, "speaker": spk, "gender": v.gender, "duration": len(x) / sr}
        info.append(f"{spk[1:]}  23  {v.gender}    English    Southern  England")
    (root / "speaker-info.txt").write_text("\n".join(info) + "\n", encoding="utf-8")
    return truth


def hf_saved(path: Path, utterances: list, speaker: str) -> dict[str, dict]:
    """``utterances`` as a ``datasets`` DatasetDict (split ``train``) saved by ``save_to_disk``:
    ``id``, ``audio`` (FLAC bytes at the recording's rate, the ``Audio`` feature), ``sentence``,
    ``who``; returns each row's truth by id. ``datasets`` encodes Audio only through torchcodec,
    so the table is built in Arrow in the feature's schema and wrapped in a ``Dataset``."""
    import pyarrow as pa
    from datasets import Audio, Dataset, DatasetDict, Features, Value
    from datasets.table import InMemoryTable

    cols: dict[str, list] = {"id": [], "audio": [], "sentence": [], "who": []}
    truth = {}
    for k, u in enumerate(utterances):
        x, sr = real_speech.read(u.path)
        buf = io.BytesIO()
        sf.write(buf, x, sr, format="FLAC", subtype="PCM_16")
        rid = f"{speaker}-{k:02d}"
        for col, v in zip(cols, (rid, {"bytes": buf.getvalue(), "path": f"{rid}.flac"}, u.text, speaker)):
            cols[col].append(v)
        truth[rid] = {"text": u.text, "speaker": speaker, "duration": len(x) / sr}
    features = Features({"id": Value("string"), "audio": Audio(), "sentence": Value("string"), "who": Value("string")})
    table = pa.table(cols, schema=features.arrow_schema)
    DatasetDict({"train": Dataset(InMemoryTable(table))}).save_to_disk(str(path))
    return truth


def lhotse_manifests(root: Path) -> dict[str, dict]:
    """Lhotse's own manifests of real speech under ``root``, written by its API:
    ``recordings.jsonl.gz`` and ``supervisions.jsonl.gz`` (``Recording.from_file``,
    ``SupervisionSet.to_file``) and ``cuts.jsonl.gz`` (``CutSet.from_manifests``) of the same:
    three of the cards speaker's files, one supervision each, and a two-channel recording
    (``call.flac``): two of the LibriVox reader's sentences on channel 0, 0.5 s apart, two
    supervisions on that channel at their offsets, and the cards speaker's other two files on
    channel 1 all along (what a stage reading both channels would hear). Returns each supervision's truth by id."""
    import numpy as np
    from lhotse import CutSet, Recording, RecordingSet, SupervisionSegment, SupervisionSet

    root.mkdir(parents=True, exist_ok=True)
    recs, sups, truth = [], [], {}
    for k, u in enumerate(real_speech.cards()[:3]):
        r = Recording.from_file(u.path, recording_id=f"cards-{k}")
        recs.append(r)
        sid = f"cards-{k}-sup"
        sups.append(SupervisionSegment(sid, r.id, 0.0, r.duration, channel=0, text=u.text, speaker="cards_lh",
                                       language="English"))  # fmt: skip
        truth[sid] = {"text": u.text, "speaker": "cards_lh", "offset": 0.0, "duration": r.duration}
    said = [real_speech.librivox()[i] for i in (1, 4)]
    xs = [real_speech.read(u.path, 16000)[0] for u in said]
    gap = np.zeros(8000, np.float32)
    left = np.concatenate([xs[0], gap, xs[1]])
    other = [real_speech.read(u.path, 16000)[0] for u in real_speech.cards()[3:]]
    right = np.resize(np.concatenate(other), len(left))
    sf.write(root / "call.flac", np.stack([left, right], axis=1), 16000, subtype="PCM_16")
    recs.append(Recording.from_file(root / "call.flac", recording_id="call"))
    for k, (u, start) in enumerate(zip(said, (0.0, (len(xs[0]) + len(gap)) / 16000))):
        sid, duration = f"call-{k}", len(xs[k]) / 16000
        sups.append(SupervisionSegment(sid, "call", start, duration, channel=0, text=u.text, speaker="librivox_lh"))
        truth[sid] = {"text": u.text, "speaker": "librivox_lh", "offset": start, "duration": duration, "channel": 0}
    recordings, supervisions = RecordingSet.from_recordings(recs), SupervisionSet.from_segments(sups)
    recordings.to_file(root / "recordings.jsonl.gz")
    supervisions.to_file(root / "supervisions.jsonl.gz")
    CutSet.from_manifests(recordings=recordings, supervisions=supervisions).to_file(root / "cuts.jsonl.gz")
    return truth


if (
    __name__ == "__main__"
):  # python -m tests.ingest.source_corpora hf|lhotse DIR: the corpus written; its truth on stdout
    if sys.argv[1:2] not in (["hf"], ["lhotse"]) or len(sys.argv) != 3:
        raise SystemExit("usage: python -m tests.ingest.source_corpora hf|lhotse DIR")
    if sys.argv[1] == "hf":
        print(json.dumps(hf_saved(Path(sys.argv[2]), alsa_with_text(), "alsa_voice")))
    else:
        print(json.dumps(lhotse_manifests(Path(sys.argv[2]))))
