#!/usr/bin/env python3
"""Ingest of a corpus in its own layout at 10^6 utterances (a Kaldi data directory with
``utt2dur``, a Lhotse supervision manifest), each against a NeMo manifest of the same
utterances.

    .venvs/ingest/bin/python bench/ingest/sources_scale.py [--formats kaldi lhotse]
        [--utterances 1000000] [--keep DIR]

Every file is a link to one real recording of tests/real_speech.py, so every file is there
(with ``probe: false`` ingest touches no audio file: the source's durations are taken, and
a missing file would be VAD's reject). Per format:

* ``kaldi``: a directory (``wav.scp``, ``text``, ``utt2spk``, ``spk2utt``, ``spk2gender``,
  ``utt2dur``; no ``segments``: each utterance a file of its own, as in most read-speech
  recipes), the files in folders of 1000;
* ``lhotse``: a RecordingSet and a SupervisionSet written by Lhotse's own writers
  (``open_writer``, ``.jsonl.gz``): one-hour recordings of 16 kHz, each cut into 360
  supervisions of 10 s with a text, a speaker and a language;

and a NeMo-style manifest of the same utterances (path, duration, text, speaker). Then:

  1. the reader alone (``speechprep.ingest.sources.<format>.read`` into a counting sink, no
     file checked, as ingest reads with ``probe: false``);
  2. the ingest job through the workflow for the source and for the manifest,
     ``snakemake results/<ds>/manifest.jsonl`` with the local profile (wall, start-up
     included; ``probe: false``, ``text: given``, ``shard_hours: 1.0``), in the same run of
     this script, and the source's job's own wall, CPU and peak RSS.   target: < 2 min

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

PER_FOLDER = 1000  # Kaldi: files per folder
PER_RECORDING = 360  # Lhotse: 10 s supervisions in a one-hour recording
RATE = 16000
COMMON = {"probe": False, "shard_hours": 1.0, "text": "given"}


def _source_audio() -> str:
    from tests import real_speech

    return str(real_speech.librivox()[0].path)


def _link(path: Path, src: str) -> None:
    if not path.is_symlink():
        path.symlink_to(src)


def write_kaldi(work: Path, n: int) -> tuple[dict, Path]:
    """A Kaldi directory of ``n`` utterances and the manifest of them: the dataset's source key."""
    src, kaldi, manifest = _source_audio(), work / "kaldi", work / "manifest.jsonl"
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
            _link(link, src)
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
    return {"kaldi": str(kaldi)}, manifest


def write_lhotse(work: Path, n: int) -> tuple[dict, Path]:
    """A RecordingSet and a SupervisionSet of ``n`` supervisions (Lhotse's writers) and the manifest of them."""
    from lhotse import Recording, RecordingSet, SupervisionSegment, SupervisionSet
    from lhotse.audio import AudioSource

    src, links = _source_audio(), work / "audio"
    links.mkdir(parents=True, exist_ok=True)
    rec_path, sup_path, manifest = work / "recordings.jsonl.gz", work / "supervisions.jsonl.gz", work / "manifest.jsonl"
    with (
        RecordingSet.open_writer(rec_path) as rw,
        SupervisionSet.open_writer(sup_path) as sw,
        open(manifest, "w", encoding="utf-8") as m,
    ):
        for r in range(-(-n // PER_RECORDING)):
            rid = f"rec{r:06d}"
            link = links / f"{rid}.wav"
            _link(link, src)
            rw.write(Recording(rid, [AudioSource("file", [0], str(link))], RATE, 3600 * RATE, 3600.0))
            for k in range(min(PER_RECORDING, n - r * PER_RECORDING)):
                sid, text, spk = f"{rid}-{k:03d}", f"utterance {k} of recording {r} in the corpus", f"spk{r % 5000:04d}"
                sup = SupervisionSegment(sid, rid, 10.0 * k, 9.5, channel=0, text=text, speaker=spk, language="English")
                sw.write(sup)
                line = {"id": sid, "audio_filepath": str(link), "offset": 10.0 * k, "duration": 9.5}
                m.write(json.dumps({**line, "text": text, "speaker": spk, "language": "en"}) + "\n")
    return {"lhotse": {"recordings": str(rec_path), "supervisions": str(sup_path)}}, manifest


WRITERS = {"kaldi": write_kaldi, "lhotse": write_lhotse}


def corpus(work: Path, fmt: str, n: int) -> tuple[dict, Path]:
    """The format's source and its NeMo manifest below ``work/<fmt>`` (kept: written once per size)."""
    where = work / fmt
    made = where / f"written.{n}.json"
    if made.exists():
        spec = json.loads(made.read_text(encoding="utf-8"))
        return spec, where / "manifest.jsonl"
    where.mkdir(parents=True, exist_ok=True)
    t = time.perf_counter()
    spec, manifest = WRITERS[fmt](where, n)
    made.write_text(json.dumps(spec), encoding="utf-8")
    print(f"{fmt}: {n:,} utterances and their NeMo manifest written in {time.perf_counter() - t:.1f} s")
    return spec, manifest


def ingest(work: Path, name: str, ds: dict) -> tuple[float, str, str]:
    """The ingest job of dataset ``name`` through snakemake: wall seconds, its summary line and
    the job's own wall, CPU and memory (its log's ``job used`` line)."""
    run = work / f"run_{name}"
    run.mkdir(exist_ok=True)
    (run / "config.yaml").write_text(json.dumps({"datasets": {name: ds}, "stages": ["vad", "asr"]}), encoding="utf-8")
    cmd = [str(REPO / ".venvs/workflow/bin/python"), "-m", "snakemake", "-s", str(REPO / "Snakefile")]
    cmd += ["--directory", str(run), "--configfile", str(run / "config.yaml")]
    cmd += ["--profile", str(REPO / "profiles/local"), "--cores", "2", "--forceall", f"results/{name}/manifest.jsonl"]
    t = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True, encoding="utf-8")
    dt = time.perf_counter() - t
    if p.returncode != 0:
        raise SystemExit(f"failed: {' '.join(cmd)}\n{(p.stdout + p.stderr)[-4000:]}")
    log = (run / f"results/{name}/logs/ingest.log").read_text(encoding="utf-8").splitlines()
    summary = next(x for x in reversed(log) if "'accepted'" in x)
    used = json.loads(next(x for x in reversed(log) if "job used" in x).split("job used", 1)[1])
    return dt, summary, f"{used['wall_s']:.1f} s wall, {used['cpu_s']:.1f} CPU-s, {used['rss_mb']:,.0f} MB peak RSS"


def measure(work: Path, fmt: str, n: int) -> None:
    """One format's rows: its reader alone, then its ingest job and the manifest's."""
    spec, manifest = corpus(work, fmt, n)
    from speechprep.ingest.sources import READERS, Count

    read = READERS[fmt]  # imports the reader (and Lhotse, and torch with it) before the clock starts
    sink = Count(check_files=False)
    t, cpu = time.perf_counter(), time.process_time()
    read(spec[fmt], sink)
    dt, cpu = time.perf_counter() - t, time.process_time() - cpu
    print(f"{fmt} 1. reader alone: {dt:.1f} s wall, {cpu:.1f} CPU-s, {sink.lines:,} lines, {sink.rejects} rejects")
    s, ssum, used = ingest(work, fmt, {**spec, **COMMON})
    m, msum, _ = ingest(work, f"{fmt}_nemo", {"manifest": str(manifest), **COMMON})
    walls = f"{fmt} {s:.1f} s, manifest {m:.1f} s, ratio {s / m:.2f}"
    print(f"{fmt} 2. ingest, snakemake wall (start-up included): {walls}")
    print(f"   (target: {fmt} < 120 s); the {fmt} job: {used}\n   {ssum}\n   {msum}")
    print(f"   load average after it: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--formats", nargs="+", choices=list(WRITERS), default=list(WRITERS))
    ap.add_argument("--utterances", type=int, default=1_000_000)
    ap.add_argument("--keep", type=Path, help="a working directory to keep (its corpora are read again)")
    a = ap.parse_args()
    work = a.keep or Path(tempfile.mkdtemp(prefix="sources_scale_"))
    work.mkdir(parents=True, exist_ok=True)
    for fmt in a.formats:
        measure(work, fmt, a.utterances)
    print(f"work: {work}")


if __name__ == "__main__":
    main()
