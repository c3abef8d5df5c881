"""scripts/compare_results.py: two result trees are the same, or each difference is named; a
stage only the second run ran may add its own files and its lines' fields, and nothing else."""

import json
import subprocess
import sys
from pathlib import Path

from tests.support import REPO

SCRIPT = REPO / "scripts" / "compare_results.py"


def tree(root: Path, lines: list[dict], extra: dict[str, str] | None = None) -> Path:
    res = root / "results"
    (res / "demo" / "asr").mkdir(parents=True)
    text = "".join(json.dumps({**x, "audio_filepath": f"{root}/a.wav"}) + "\n" for x in lines)
    (res / "demo" / "asr" / "shard-0000.jsonl").write_text(text, encoding="utf-8")
    for rel, body in (extra or {}).items():
        (res / rel).parent.mkdir(parents=True, exist_ok=True)
        (res / rel).write_text(body, encoding="utf-8")
    return res


def compare(a: Path, b: Path, *options: str) -> tuple[int, str]:
    p = subprocess.run([sys.executable, str(SCRIPT), str(a), str(b), *options], capture_output=True, text=True)
    return p.returncode, p.stdout


def test_new_fields_and_a_new_stages_files_are_allowed_only_where_named(tmp_path):
    lines = [{"id": "u1", "text": "a cat", "wall_seconds": 1.0}, {"id": "u2", "text": "a dog"}]
    a = tree(tmp_path / "A", lines)
    music = {"demo/music/shard-0000.segments.jsonl": '{"id": "u1"}\n'}
    b = tree(tmp_path / "B", [{**x, "music_prob": 0.01, "wall_seconds": 2.0} for x in lines], music)
    rc, out = compare(a, b)
    assert rc == 1 and "only in" in out and "shard-0000.jsonl: line 1 differs (music_prob)" in out
    rc, out = compare(a, b, "--new-field", "music_prob", "--added", "demo/music/*")
    assert rc == 0 and "the same" in out, out
    # anything else that changed is still a difference
    c = tree(tmp_path / "C", [{**lines[0], "music_prob": 0.9}, {**lines[1], "text": "a hog"}], music)
    rc, out = compare(a, c, "--new-field", "music_prob", "--added", "demo/music/*")
    assert rc == 1 and "line 2 differs (text)" in out
    rc, out = compare(c, a, "--new-field", "music_prob", "--added", "demo/music/*")  # files only A has: always
    assert rc == 1 and "only in" in out and "demo/music/shard-0000.segments.jsonl" in out
