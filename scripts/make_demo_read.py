#!/usr/bin/env python3
"""Copy the demo's transcribed dataset: real speech with its real transcripts (run once; output is committed).

    PYTHONPATH=. .venvs/vad/bin/python scripts/make_demo_read.py [--out resources/demo/read]

From Debian's pocketsphinx-testdata (BSD-2-Clause, Carnegie Mellon University; the
LibriVox recordings are public domain): the five sentences of Sense and
Sensibility read by one LibriVox reader and the five utterances of the speaker
naming playing cards, 16 kHz mono, written as FLAC, with ``manifest.jsonl`` (one
line per utterance: relative ``audio_filepath``, ``id``, the human ``text``,
``speaker``, ``language``). The package is fetched as the tests fetch it
(tests/real_speech.py: ``apt-get download`` + ``dpkg -x``, nothing installed).
The demo runs it with ``text: given`` (config/config.yaml, dataset ``read``).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import soundfile as sf

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests import real_speech as rs  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(REPO / "resources" / "demo" / "read"))
    out = Path(ap.parse_args().out)
    lines = []
    for group, utterances in (("librivox", rs.librivox()), ("cards", rs.cards())):
        (out / group).mkdir(parents=True, exist_ok=True)
        for u in utterances:
            x, sr = rs.read(u.path)
            stem = u.path.stem.rsplit("-", 1)[-1]  # 0870 of sense_and_sensibility_01_austen_64kb-0870
            rel = f"{group}/{stem}.flac"
            sf.write(str(out / rel), x, sr, format="FLAC", subtype="PCM_16")
            lines.append({"id": f"{group}_{stem}", "audio_filepath": rel, "text": u.text, "speaker": u.speaker,
                          "language": "en"})  # fmt: skip
    with open(out / "manifest.jsonl", "w", encoding="utf-8") as f:
        f.writelines(json.dumps(x, ensure_ascii=False) + "\n" for x in lines)
    print(f"{len(lines)} utterances in {out}", file=sys.stderr)


if __name__ == "__main__":
    main()
