"""Real speech over real music in long recordings, through the whole default workflow: the
share of each level's speech that reaches the kept TTS set, and what dropped the rest.

    SPEECHPREP_REAL_SPEECH=.cache/real_speech nice -n 10 .venvs/music/bin/python \\
        bench/music/workflow_kept.py [--split held_out] [--speakers 5] [--per-block 3] [--dir DIR] [--without-music]

Recordings (tests/music/mixes.py, ``long_recordings``; licences in tests/real_speech.py): one
per KLettres speaker of the split (held apart: he, lt, ml, nb, ru; never fitted on), 50-110
s each: a block of ``--per-block`` of the speaker's segments (three letters each, 1 s apart)
clean and with the split's music (ASC's game music, the music-on-hold tracks) under it at
20, 10, 5 and 0 dB (speech power over music power, the music running 1 s either side of the
block's words), 4 s of music alone, and the room's quiet (-60 dB) between blocks. They run as
one ``audio_dir`` dataset (``single_speaker: true``) with the default ``stages:`` and the
demo's models (``make demo`` builds them), in ``--dir``, with curation's checks of the ASR
text off (``min_confidence``, ``min_chars_per_s``, ``max_chars_per_s``: the demo's ASR model
knows only the demo's English phrases, so they would drop these voices for their words).
``--without-music`` runs the same without the music stage (``stages: [vad, asr, s2s, curate,
tts]``): what the rest of curation (the SNR, DNSMOS) does with music alone.

Printed per level: the share of its spans' seconds VAD takes for speech, the share of those
VAD seconds in the kept TTS set (``train_manifest.jsonl`` and ``val_manifest.jsonl``), and the
reasons the rest went, by seconds. docs/stages/music.md, "Through the workflow".
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from tests.music import mixes as M
from tests.support import REPO

OFF = {"min_confidence": None, "min_chars_per_s": None, "max_chars_per_s": None}


def run(split: str, speakers: int, per_block: int, work: Path, music: bool = True) -> tuple[list, dict, float]:
    """Build the recordings in ``work/audio``, run the workflow in ``work``; the spans, the
    fates by level (:func:`tests.music.mixes.fates`) and the run's wall seconds."""
    _, spans = M.long_recordings(split, work / "audio", speakers=speakers, per_block=per_block)
    for name in ("resources", "config"):
        if not (work / name).exists():
            (work / name).symlink_to(REPO / name)
    cfg = {"datasets": {"long": {"audio_dir": str(work / "audio"), "single_speaker": True, "shards": 1}}}
    cfg["curate"] = dict(OFF)
    if not music:
        cfg["stages"] = ["vad", "asr", "s2s", "curate", "tts"]
    (work / "long.yaml").write_text(yaml.safe_dump(cfg), encoding="utf-8")
    cmd = [str(REPO / ".venvs" / "workflow" / "bin" / "python"), "-m", "snakemake", "-s", str(REPO / "Snakefile")]
    cmd += ["--directory", str(work)]
    cmd += ["--configfile", str(work / "long.yaml"), "--profile", str(REPO / "profiles" / "local"), "--cores", "2"]
    t = time.monotonic()
    p = subprocess.run(cmd, capture_output=True, text=True, encoding="utf-8", env=os.environ.copy())
    if p.returncode != 0:
        raise SystemExit(f"the workflow failed ({' '.join(cmd)}):\n{(p.stdout + p.stderr)[-4000:]}")
    return spans, M.fates(spans, work / "results", "long"), time.monotonic() - t


def table(spans: list, fates: dict) -> None:
    total: dict = {}
    for s in spans:
        total[s.snr] = total.get(s.snr, 0.0) + s.end - s.start
    print("| level | seconds | VAD's share | kept share of VAD's | dropped as |")
    print("|---|---|---|---|---|")
    for level in M.SNRS:
        row = fates.get(level, {})
        vad = sum(row.values())
        kept = row.get("kept", 0.0) / vad if vad else float("nan")
        rest = ", ".join(f"{k} {v / vad:.3f}" for k, v in sorted(row.items(), key=lambda x: -x[1]) if k != "kept")
        name = "clean" if level is None else "music alone" if level == "music" else f"{level:g} dB"
        print(f"| {name} | {total.get(level, 0.0):.1f} | {vad / total[level]:.3f} | {kept:.3f} | {rest or '-'} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--split", default="held_out", choices=("calibration", "held_out"))
    ap.add_argument("--speakers", type=int, default=5)
    ap.add_argument("--per-block", type=int, default=3)
    ap.add_argument("--dir", type=Path, default=Path("/tmp/speechprep_music_workflow"))
    ap.add_argument("--without-music", action="store_true", help="the default stages less music")
    args = ap.parse_args()
    args.dir.mkdir(parents=True, exist_ok=True)
    spans, fates, wall = run(args.split, args.speakers, args.per_block, args.dir, not args.without_music)
    print(f"{len({s.path for s in spans})} recordings, {len(spans)} spans, the workflow in {wall:.0f} s")
    table(spans, fates)


if __name__ == "__main__":
    main()
