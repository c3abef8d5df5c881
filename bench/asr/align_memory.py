"""Long-form alignment: peak memory and seconds per audio hour, by recording length.

Each length runs in its own process (so each peak RSS is its own): a recording
of the demo phrases with its book text (tests/asr/longform.py: an unread
preface and epilogue, a real voice announcing in the middle) is written first
by a child process, then aligned (speechprep.asr.align.align_recording)
with the demo ASR model. Printed per length: audio hours, seconds, seconds per
audio hour, peak RSS of the aligning process, RSS after loading the model and
grammars, the kept log-probabilities, the largest ctc-segmentation table,
blocks and alignment rounds, utterances and rejects, and the median boundary
error against the true sentence bounds.

    PYTHONPATH=. .venvs/asr/bin/python bench/asr/align_memory.py --minutes 10 120 \\
        --model resources/models/demo_asr.nemo --grammars resources/text_normalization/en
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(REPO), str(REPO / "tests" / "asr")]

PARAMS = {
    "max_segment": 20.0,
    "min_align_score": -3.0,
    "chunk_seconds": 30.0,
    "context_seconds": 2.0,
    "window_seconds": 240.0,
    "score_seconds": 0.6,
    "min_untranscribed": 1.0,
    "gap_logprob": -1.5,
    "start_pad": 0.0,
    "end_pad": 0.0,
}


def rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def build(wav: Path, minutes: float, truth: Path) -> None:
    import longform

    from tests import real_speech as rs

    announcement = [rs.read(u.path, 16000)[0] for u in rs.librivox()[:2]]
    rec = longform.build(wav, minutes, announcement=announcement)
    truth.write_text(json.dumps({"text": rec.text, "sentences": rec.sentences}), encoding="utf-8")


def align(wav: Path, truth: Path, model: str, grammars: str | None) -> dict:
    import numpy as np

    from speechprep.asr.align import AlignParams, align_recording, split_sentences
    from speechprep.asr.ctc import CtcHead
    from speechprep.asr.model import load_model
    from speechprep.text.spoken import SpokenNormalizer

    t = json.loads(truth.read_text(encoding="utf-8"))
    head = CtcHead(load_model(model, "cpu"))
    spoken = SpokenNormalizer({"en": grammars}) if grammars else None
    if spoken:
        spoken.normalizer("en")
    loaded = rss_mb()
    t0 = time.perf_counter()
    out = align_recording(
        {"id": "rec", "audio_filepath": str(wav)}, t["text"], head, AlignParams(**PARAMS), spoken, "en"
    )
    seconds = time.perf_counter() - t0
    sentences = split_sentences(t["text"], "en", spoken)
    first = sentences.index(t["sentences"][0][2])
    by_id = {u["id"]: u for u in out["utterances"]}
    err = []
    for j, (a, b, _) in enumerate(t["sentences"]):
        u = by_id.get(f"rec_{first + j:04d}")
        if u:
            err += [abs(u["offset"] - a), abs(u["offset"] + u["duration"] - b)]
    f = out["figures"]
    hours = f["frames"] * f["frame_seconds"] / 3600
    return {
        "audio_h": round(hours, 3),
        "seconds": round(seconds, 1),
        "s_per_audio_h": round(seconds / hours, 1),
        "peak_rss_mb": round(rss_mb()),
        "rss_loaded_mb": round(loaded),
        "lpz_mb": round(f["lpz_bytes"] / 2**20, 1),
        "table_mb": round(f["table_bytes"] / 2**20, 1),
        "blocks": f["blocks"],
        "rounds": f["rounds"],
        "sentences": len(t["sentences"]),
        "utterances": len(out["utterances"]),
        "rejects": len(out["rejects"]),
        "median_boundary_error_s": round(float(np.median(err)), 3) if err else None,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--minutes", type=float, nargs="+", default=[10, 120])
    ap.add_argument("--model", default=str(REPO / "resources" / "models" / "demo_asr.nemo"))
    ap.add_argument("--grammars", default=str(REPO / "resources" / "text_normalization" / "en"))
    ap.add_argument("--child", nargs=3, metavar=("ACTION", "WAV", "TRUTH"), help=argparse.SUPPRESS)
    a = ap.parse_args()
    grammars = a.grammars if Path(a.grammars, "grammars.json").is_file() else None
    if a.child:
        action, wav, truth = a.child
        if action == "build":
            build(Path(wav), a.minutes[0], Path(truth))
        else:
            print(json.dumps(align(Path(wav), Path(truth), a.model, grammars)))
        return
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for minutes in a.minutes:
            wav, truth = Path(tmp) / f"rec{minutes}.wav", Path(tmp) / f"rec{minutes}.json"
            me = [sys.executable, __file__, "--minutes", str(minutes), "--model", a.model, "--grammars", a.grammars]
            subprocess.run([*me, "--child", "build", str(wav), str(truth)], check=True)
            done = subprocess.run([*me, "--child", "align", str(wav), str(truth)], check=True, capture_output=True)
            row = {"minutes": minutes, **json.loads(done.stdout.decode("utf-8").strip().splitlines()[-1])}
            print(json.dumps(row), flush=True)
            rows.append(row)
            wav.unlink()
    cols = list(rows[0])
    print("| " + " | ".join(cols) + " |\n|" + "---|" * len(cols))
    for r in rows:
        print("| " + " | ".join(str(r[c]) for c in cols) + " |")


if __name__ == "__main__":
    main()
