#!/usr/bin/env python3
"""Ingest of a Kaldi data directory of 10^6 utterances with ``utt2dur``, against a NeMo
manifest of the same utterances.

    .venvs/ingest/bin/python bench/ingest/sources_scale.py [--utterances 1000000] [--keep DIR]

Writes a Kaldi directory (``wav.scp``, ``text``, ``utt2spk``, ``spk2utt``, ``spk2gender``,
``utt2dur``; no ``segments``: each utterance a file of its own, as in most read-speech
recipes) whose files are links to one real recording of tests/real_speech.py, in folders of
1000 (ingest checks that each file exists, not its length: ``probe: false`` takes
``utt2dur``'s durations, no file is opened), and a NeMo-style manifest of the same
utterances (path, duration, text, speaker). Then:

  1. the Kaldi reader alone (``speechprep.ingest.sources.kaldi.read`` into a counting sink);
  2. the ingest job through the workflow for each, ``snakemake results/<ds>/manifest.jsonl``
     with the local profile (wall, start-up included; ``probe: false``, ``text: given``,
     ``shard_hours: 1.0``), the Kaldi directory and the manifest in the same run of this
     script.                                                        target: < 2 min

Snakemake runs from .venvs/workflow (its job in .venvs/ingest, as every run's).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

PER_FOLDER = 1000


def write_corpus(work: Path, n: int) -> tuple[Path, Path]:
    """The Kaldi directory and the manifest of ``n`` utterances (kept when already written)."""
    from tests import real_speech

    src = real_speech.librivox()[0].path
    kaldi, manifest = work / "kaldi", work / "manifest.jsonl"
    if (kaldi / ".done").exists():
        return kaldi, manifest
    kaldi.mkdir(parents=True, exist_ok=True)
    names = ("wav.scp", "text", "utt2spk", "utt2dur")
    speakers: dict[str, list[str]] = {}
    with ExitStack() as stack:
        files = {name: stack.enter_context(open(kaldi / name, "w", encoding="utf-8")) for name in names}
        m = stack.enter_context(open(manifest, "w", encoding="utf-8"))
        for k in range(n):
            folder = work / "audio" / f"{k // PER_FOLDER:04d}"
            if k % PER_FOLDER == 0:
                folder.mkdir(parents=True, exist_ok=True)
            link = folder / f"u{k:07d}.wav"
            if not link.exists():
                os.symlink(src, link)
            spk = f"spk{k % 5000:04d}"
            utt = f"{spk}-u{k:07d}"  # Kaldi sorts an utterance after its speaker
            text = f"utterance {k} of the corpus read by {spk}"
            files["wav.scp"].write(f"{utt} {link}\n")
            files["text"].write(f"{utt} {text}\n")
            files["utt2spk"].write(f"{utt} {spk}\n")
            files["utt2dur"].write(f"{utt} 7.1\n")
            speakers.setdefault(spk, []).append(utt)
            line = {"id": utt, "audio_filepath": str(link), "duration": 7.1, "text": text, "speaker": spk}
            m.write(json.dumps(line) + "\n")
    with open(kaldi / "spk2utt", "w", encoding="utf-8") as f:
        f.writelines(f"{s} {' '.join(u)}\n" for s, u in speakers.items())
    with open(kaldi / "spk2gender", "w", encoding="utf-8") as f:
        f.writelines(f"{s} {'mf'[int(s[3:]) % 2]}\n" for s in speakers)
    (kaldi / ".done").touch()
    return kaldi, manifest


def ingest(work: Path, ds: dict) -> tuple[float, str]:
    """The ingest job of ``ds`` through snakemake: wall seconds and its summary line."""
    run = work / f"run_{next(iter(ds))}"
    run.mkdir(exist_ok=True)
    (run / "config.yaml").write_text(json.dumps({"datasets": ds, "stages": ["vad", "asr"]}), encoding="utf-8")
    name = next(iter(ds))
    cmd = [str(REPO / ".venvs/workflow/bin/python"), "-m", "snakemake", "-s", str(REPO / "Snakefile")]
    cmd += ["--directory", str(run), "--configfile", str(run / "config.yaml")]
    cmd += ["--profile", str(REPO / "profiles/local"), "--cores", "2", "--forceall", f"results/{name}/manifest.jsonl"]
    t = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True, encoding="utf-8")
    dt = time.perf_counter() - t
    if p.returncode != 0:
        raise SystemExit(f"failed: {' '.join(cmd)}\n{(p.stdout + p.stderr)[-4000:]}")
    log = (run / f"results/{name}/logs/ingest.log").read_text(encoding="utf-8").splitlines()
    return dt, next(x for x in reversed(log) if "'accepted'" in x)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--utterances", type=int, default=1_000_000)
    ap.add_argument("--keep", type=Path, help="a working directory to keep (default: a temporary one)")
    a = ap.parse_args()
    work = a.keep or Path(tempfile.mkdtemp(prefix="sources_scale_"))
    work.mkdir(parents=True, exist_ok=True)
    t = time.perf_counter()
    kaldi, manifest = write_corpus(work, a.utterances)
    print(f"corpus: {a.utterances:,} utterances (Kaldi directory and manifest) in {time.perf_counter() - t:.1f} s")

    from speechprep.ingest.sources import Count
    from speechprep.ingest.sources import kaldi as reader

    sink = Count()
    t = time.perf_counter()
    reader.read(str(kaldi), sink)
    dt = time.perf_counter() - t
    print(f"1. Kaldi reader alone: {dt:.1f} s, {sink.lines:,} lines, {sink.rejects} rejects")

    common = {"probe": False, "shard_hours": 1.0, "text": "given"}
    k, ksum = ingest(work, {"kal": {"kaldi": str(kaldi), **common}})
    m, msum = ingest(work, {"nemo": {"manifest": str(manifest), **common}})
    print(f"2. ingest, snakemake wall (start-up included): Kaldi {k:.1f} s, manifest {m:.1f} s, ratio {k / m:.2f}")
    print(f"   (target: Kaldi < 120 s)\n   {ksum}\n   {msum}")
    print(f"work: {work}")


if __name__ == "__main__":
    main()
