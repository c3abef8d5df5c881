#!/usr/bin/env python3
"""Ingest of a Lhotse supervision manifest of 10^6 lines, against a NeMo manifest of the
same utterances.

    .venvs/ingest/bin/python bench/ingest/lhotse_scale.py [--supervisions 1000000] [--keep DIR]

Writes a RecordingSet and a SupervisionSet with Lhotse's own writers (``open_writer``,
``.jsonl.gz``): one-hour recordings of 16 kHz (each a link to one real recording of
tests/real_speech.py, so every file is there: ingest checks that a recording's file
exists, not its length, with ``probe: false``), each cut into 360 supervisions of 10 s
with a text, a speaker and a language; and a NeMo-style manifest of the same utterances
(path, offset, duration, text, speaker, id). Then:

  1. the reader alone (``speechprep.ingest.sources.lhotse.read`` into a counting sink);
  2. the ingest job through the workflow for each, ``snakemake results/<ds>/manifest.jsonl``
     with the local profile (wall, start-up included; ``probe: false``, ``text: given``,
     ``shard_hours: 1.0``; bench/ingest/sources_scale.py's ``ingest``), the Lhotse manifests
     and the NeMo manifest in the same run of this script.          target: < 2 min

Snakemake runs from .venvs/workflow (its job in .venvs/ingest, as every run's).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench" / "ingest"))  # sources_scale: its ingest()

PER_RECORDING = 360  # 10 s supervisions in a one-hour recording
RATE = 16000


def write_manifests(work: Path, n: int) -> tuple[Path, Path]:
    from lhotse import Recording, RecordingSet, SupervisionSegment, SupervisionSet
    from lhotse.audio import AudioSource

    from tests import real_speech

    src = real_speech.librivox()[0].path
    links = work / "audio"
    links.mkdir(parents=True, exist_ok=True)
    rec_path, sup_path = work / "recordings.jsonl.gz", work / "supervisions.jsonl.gz"
    recordings = -(-n // PER_RECORDING)
    with (
        RecordingSet.open_writer(rec_path) as rw,
        SupervisionSet.open_writer(sup_path) as sw,
        open(work / "manifest.jsonl", "w", encoding="utf-8") as m,
    ):
        for r in range(recordings):
            link = links / f"rec{r:06d}.wav"
            if not link.exists():
                link.symlink_to(src)
            rid = f"rec{r:06d}"
            rw.write(Recording(rid, [AudioSource("file", [0], str(link))], RATE, 3600 * RATE, 3600.0))
            for k in range(min(PER_RECORDING, n - r * PER_RECORDING)):
                sid, text, spk = f"{rid}-{k:03d}", f"utterance {k} of recording {r} in the corpus", f"spk{r % 5000:04d}"
                sup = SupervisionSegment(sid, rid, 10.0 * k, 9.5, channel=0, text=text, speaker=spk, language="English")
                sw.write(sup)
                line = {"id": sid, "audio_filepath": str(link), "offset": 10.0 * k, "duration": 9.5}
                m.write(json.dumps({**line, "text": text, "speaker": spk, "language": "en"}) + "\n")
    return rec_path, sup_path


def job_used(log: Path) -> str:
    """The ingest job's own wall, CPU and memory, from its log's ``job used`` line."""
    line = next(x for x in reversed(log.read_text(encoding="utf-8").splitlines()) if "job used" in x)
    used = json.loads(line.split("job used", 1)[1])
    return f"{used['wall_s']:.1f} s wall, {used['cpu_s']:.1f} CPU-s, {used['rss_mb']:,.0f} MB peak RSS"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--supervisions", type=int, default=1_000_000)
    ap.add_argument("--keep", type=Path, help="a working directory to keep (its manifests are read again)")
    a = ap.parse_args()
    work = a.keep or Path(tempfile.mkdtemp(prefix="lhotse_scale_"))
    work.mkdir(parents=True, exist_ok=True)
    t = time.perf_counter()
    rec_path, sup_path = work / "recordings.jsonl.gz", work / "supervisions.jsonl.gz"
    made = work / f"manifests.{a.supervisions}"
    if not made.exists():
        write_manifests(work, a.supervisions)
        made.touch()
    mb = (rec_path.stat().st_size + sup_path.stat().st_size) / 1e6
    print(
        f"manifests: {a.supervisions:,} supervisions (Lhotse's writers), {time.perf_counter() - t:.1f} s, {mb:.1f} MB"
    )

    import lhotse as _lhotse  # noqa: F401 (the reader imports Lhotse, and torch with it, at its first line)
    from sources_scale import ingest

    from speechprep.ingest.sources import Count, lhotse

    sink = Count()
    t, cpu = time.perf_counter(), time.process_time()
    lhotse.read({"recordings": str(rec_path), "supervisions": str(sup_path)}, sink)
    dt, cpu = time.perf_counter() - t, time.process_time() - cpu
    print(f"1. reader alone: {dt:.1f} s wall, {cpu:.1f} CPU-s, {sink.lines:,} lines, {sink.rejects} rejects")

    common = {"probe": False, "shard_hours": 1.0, "text": "given"}
    lh, lsum = ingest(work, {"lh": {"lhotse": {"recordings": str(rec_path), "supervisions": str(sup_path)}, **common}})
    used = job_used(work / "run_lh/results/lh/logs/ingest.log")
    m, msum = ingest(work, {"nemo": {"manifest": str(work / "manifest.jsonl"), **common}})
    print(f"2. ingest, snakemake wall (start-up included): Lhotse {lh:.1f} s, manifest {m:.1f} s, ratio {lh / m:.2f}")
    print(f"   (target: Lhotse < 120 s); the Lhotse job: {used}")
    print(f"   {lsum}\n   {msum}")
    print(f"   load average after it: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    print(f"work: {work}")


if __name__ == "__main__":
    main()
