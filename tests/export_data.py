"""A small dataset of real speech as the TTS stage leaves it, in three shards, and
its export through speechprep.export: what the loader tests of every format read
(tests/export in the export env, tests/asr/test_export_nemo.py with NeMo).

Shard ``shard-0000``: three LibriVox sentences (one with an id holding a dot, a
slash and non-ASCII); ``shard-0001``: two segments whose source is missing
(every one rejected: an empty shard); ``shard-0002``: two card names and the
48 kHz ALSA voice (resampled by the export). Imports only numpy and soundfile
beyond speechprep, so every stage's venv can use it.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import soundfile as sf

from speechprep.export import stage as export
from speechprep.export.params import BucketParams, ExportParams
from speechprep.io.jsonio import write_jsonl
from speechprep.io.npyio import save_npy
from tests import real_speech

SHARDS = ("shard-0000", "shard-0001", "shard-0002")
ODD_ID = "librivox.reader/ünïcode_0000"


def _segments(root: Path) -> dict[str, list[tuple[str, Path, str | None, str]]]:
    """(id, source, text, speaker) per shard."""
    books, cards, alsa = real_speech.librivox()[:3], real_speech.cards()[:2], real_speech.alsa_voice()[:1]
    out = {
        "shard-0000": [(ODD_ID if k == 0 else f"book_{k:04d}", u.path, u.text, u.speaker) for k, u in enumerate(books)],
        "shard-0001": [(f"gone_{k:04d}", root / "gone" / f"{k}.wav", "nothing", "nobody") for k in range(2)],
        "shard-0002": [(f"card_{k:04d}", u.path, u.text, u.speaker) for k, u in enumerate(cards)],
    }
    out["shard-0002"] += [("alsa_0000", u.path, "front left", None) for u in alsa]  # no speaker: a null field
    return out


def make_dataset(root: Path) -> dict[str, list[dict]]:
    """``root/tts/``: the train and val manifests (every shard's lines, alternating),
    each shard's features index and arrays (one ``.npy`` per segment and kind);
    returns the manifest lines per shard."""
    rng = np.random.default_rng(0)
    by_shard = {}
    for shard, segs in _segments(root).items():
        lines = []
        for id_, src, text, speaker in segs:
            total = sf.info(str(src)).duration if src.exists() else 3.0
            line = {"id": id_, "dataset": "real", "text": text, "text_normalized": text.upper()}
            line.update(text_normalization="off", audio_filepath=str(src), offset=0.25)
            line.update(duration=round(min(total - 0.3, 4.0), 3), speaker=speaker, language="en")
            stem = export.member_key(id_)
            arrays = {
                "text_ids": rng.integers(0, 256, len(text), dtype=np.int32),
                "codes": rng.integers(0, 500, int(line["duration"] * 50), dtype=np.int32),
                "condition": rng.standard_normal(256).astype(np.float32),
                "emo_vec": rng.standard_normal(88).astype(np.float32),
                "phoneme_ids": rng.integers(0, 150, 2 * len(text) + 1, dtype=np.int32),  # tts.phonemes on
            }
            for kind, a in arrays.items():
                path = root / "tts" / shard / kind / f"{stem}.npy"
                save_npy(path, a)
                line[kind] = str(path)
                line[f"{kind}_dim" if kind in ("condition", "emo_vec") else f"{kind}_len"] = int(a.size)
            line["phonemes"] = text.lower()  # (a stand-in string: the exports carry it as it is)
            lines.append(line)
        write_jsonl(root / "tts" / f"{shard}.features.jsonl", [{"id": x["id"]} for x in lines])
        by_shard[shard] = lines
    write_manifests(root, by_shard)
    return by_shard


def write_manifests(root: Path, by_shard: dict[str, list[dict]]) -> None:
    """The train and val manifests: every shard's lines, alternating."""
    everything = [x for s in SHARDS for x in by_shard[s]]
    write_jsonl(root / "tts" / "train_manifest.jsonl", everything[0::2])
    write_jsonl(root / "tts" / "val_manifest.jsonl", everything[1::2])


def kept(by_shard: dict[str, list[dict]]) -> list[dict]:
    """The lines the export keeps (the empty shard's are rejected), in shard order."""
    return [x for s in SHARDS for x in by_shard[s] if not x["id"].startswith("gone_")]


def export_dataset(root: Path, formats: tuple[str, ...], sample_rate: int = 16000) -> Path:
    """Every shard's export job, then each format's summary, as the workflow runs
    them; returns ``root/export``."""
    tts, out = root / "tts", root / "export"
    params = ExportParams(list(formats), sample_rate, None)
    manifests = [str(tts / "train_manifest.jsonl"), str(tts / "val_manifest.jsonl")]
    lines = {s: str(out / ".lines" / f"{s}.jsonl") for s in SHARDS}
    columns = str(out / ".lines" / "columns.json")
    export.run_lines(manifests, [str(tts / f"{s}.features.jsonl") for s in SHARDS], list(lines.values()), columns)
    for shard in SHARDS:
        export.run_shard(
            lines[shard],
            columns,
            str(out),
            str(out / f"{shard}.rejects.jsonl"),
            params,
            str(out / ".partial" / f"{shard}.jsonl"),
        )
    for fmt in formats:
        indexes = [str(out / fmt / f"{s}.index.jsonl") for s in SHARDS]
        export.run_summary(
            indexes, str(out / fmt / "index.jsonl"), str(out / fmt / "stats.json"), BucketParams(None, 4), fmt
        )
    return out
