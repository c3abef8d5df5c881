#!/usr/bin/env python3
"""Memory of the export's cut of the manifests (the ``export lines`` job), against the cut
that held every line in memory.

    .venvs/export/bin/python bench/export/lines.py [--lines 300000] [--shards 300] [--dir DIR]

Synthetic TTS manifests (train and val) of ``--lines`` lines of the fields the TTS stage
writes (an 80-character text twice, six array paths, a caption), and one features index a
shard. Each cut runs in its own forked process (its peak RSS is its own): the baseline reads
every line into a dict by id and writes each shard's lines from it (what the job did before);
``run_lines`` (speechprep.export.stage) files them into bucket files first. Prints each one's
wall time and peak RSS, the same-run ratio, and that both wrote the same bytes.
"""

from __future__ import annotations

import argparse
import hashlib
import tempfile
from pathlib import Path

import numpy as np
from scale import in_child

from speechprep.export import stage as export
from speechprep.io.jsonio import read_jsonl, write_jsonl


def write_dataset(root: Path, lines: int, shards: int) -> tuple[list[str], list[str]]:
    """The manifests and each shard's features index (ids in the shard's order)."""
    rng = np.random.default_rng(0)
    words = ["speech", "corpus", "voice", "quiet", "river", "number", "seven", "window", "garden"]
    rows, index = [], [[] for _ in range(shards)]
    for k in range(lines):
        shard = k * shards // lines
        id_ = f"book_{shard:05d}__file_{k:08d}_0000"
        text = " ".join(rng.choice(words, 12))
        row = {"id": id_, "audio_filepath": f"/data/corpus/{id_}.flac", "offset": 0.25, "duration": 4.2}
        row.update(text=text, text_normalized=text.upper(), speaker=f"spk_{k % 97}", language="en")
        row.update({kind: f"/work/results/d/tts/shard-{shard:04d}/{kind}/{id_}.npy" for kind in export.FEATURES})
        row.update(description="A woman speaks slowly in a very clean room.", snr=31.5, pitch_mean=181.2)
        rows.append(row)
        index[shard].append({"id": id_})
    manifests = [str(root / "train_manifest.jsonl"), str(root / "val_manifest.jsonl")]
    write_jsonl(manifests[0], rows[lines // 50 :])
    write_jsonl(manifests[1], rows[: lines // 50])
    features = []
    for s, ids in enumerate(index):
        features.append(str(root / f"shard-{s:04d}.features.jsonl"))
        write_jsonl(features[-1], ids)
    return manifests, features


def held_in_memory(manifests: list[str], features: list[str], out: list[str]) -> None:
    """The baseline: every line in a dict by id, then each shard's lines from it."""
    lines = {}
    for m in manifests:
        for line in read_jsonl(m):
            lines[line["id"]] = line
    for index, path in zip(features, out, strict=True):
        write_jsonl(path, (lines[f["id"]] for f in read_jsonl(index) if f["id"] in lines))


def digest(paths: list[str]) -> str:
    h = hashlib.sha256()
    for p in paths:
        h.update(Path(p).read_bytes())
    return h.hexdigest()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lines", type=int, default=300_000)
    ap.add_argument("--shards", type=int, default=300)
    ap.add_argument("--dir", help="work here and keep it (default: a temp dir, removed)")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(a.dir or tmp)
        root.mkdir(parents=True, exist_ok=True)
        manifests, features = write_dataset(root, a.lines, a.shards)
        size = sum(Path(m).stat().st_size for m in manifests) / 1e6
        print(f"export lines: {a.lines} lines ({size:.0f} MB of manifests), {a.shards} shards")
        results = {}
        for name in ("held", "run_lines"):
            out = [str(root / name / f"shard-{s:04d}.jsonl") for s in range(a.shards)]
            (root / name).mkdir(exist_ok=True)
            if name == "held":
                _, wall, rss = in_child(held_in_memory, manifests, features, out)
            else:
                _, wall, rss = in_child(export.run_lines, manifests, features, out, str(root / name / "columns.json"))
            results[name] = (wall, rss, digest(out))
            print(f"  {name:10} {wall:7.1f} s {rss:8.0f} MB peak RSS")
        (w0, r0, d0), (w1, r1, d1) = results["held"], results["run_lines"]
        print(f"  ratio run_lines / held: peak RSS {r1 / r0:.2f}, wall {w1 / w0:.2f}; same bytes: {d0 == d1}")


if __name__ == "__main__":
    main()
