"""`speakers calibrate` on real voices per condition: wideband or telephone band, one clip or
five a file, split by speaker; the figures docs/stages/README.md gives for the built-in model.

    SPEECHPREP_REAL_SPEECH=.cache/real_speech .venvs/curate/bin/python bench/speakers/conditions.py \
        [--configfile CFG ...] [--conditions wideband-1 wideband-5 telephone-1 telephone-5]

Wideband: the LibriVox reader, the cards speaker, the ALSA voice and eight klettres speakers
(at most 60 clips each, about a second: tests/real_speech.distinct_voices). Telephone: the five
professional voices' telephone prompts (8 kHz, 1-4 s; 60 each), never calibrated on elsewhere.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from speechprep.speakers import calibrate  # noqa: E402
from tests import real_speech as R  # noqa: E402

CONDITIONS = ("wideband-1", "wideband-5", "telephone-1", "telephone-5")


def utterances(band: str) -> list:
    if band == "wideband":
        return R.distinct_voices(klettres_per_language=60)
    return [u for v in R.TELEPHONE_VOICES for u in R.telephone_prompts(v, 60)]


def files(utts: list, per_file: int) -> list[str]:
    """A file id per clip: ``per_file`` consecutive clips of one voice pooled as one recording."""
    seen: dict[str, int] = {}
    out = []
    for u in utts:
        k = seen[u.speaker] = seen.get(u.speaker, -1) + 1
        out.append(f"{u.speaker}/{k // per_file}")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--configfile", nargs="*", default=[])
    ap.add_argument("--conditions", nargs="*", default=list(CONDITIONS), choices=CONDITIONS)
    a = ap.parse_args()
    print(
        "| condition | clips, voices | threshold | calibration: purity / inverse / files under one id "
        "| report: purity / inverse / files under one id / outliers |"
    )
    print("|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for cond in a.conditions:
            band, per_file = cond.split("-")
            utts = utterances(band)
            manifest = Path(tmp) / f"{cond}.jsonl"
            lines = [
                {"audio_filepath": str(u.path), "speaker": u.speaker, "file_id": f}
                for u, f in zip(utts, files(utts, int(per_file)), strict=True)
            ]
            manifest.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
            r = calibrate.run(a.configfile, str(manifest), str(Path(tmp) / f"{cond}.yaml"), "speaker")
            c, p = r["calibration"], r["report"]
            print(
                f"| {cond} | {len(lines)}, {len({u.speaker for u in utts})} | {r['threshold']:.2f} "
                f"| {c['purity']:.3f} / {c['inverse_purity']:.3f} / {c['voice_files_under_one_id']:.3f} "
                f"| {p['purity']:.3f} / {p['inverse_purity']:.3f} / {p['voice_files_under_one_id']:.3f} "
                f"/ {p['outliers']:.3f} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
