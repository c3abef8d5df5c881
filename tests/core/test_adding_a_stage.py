"""The stage docs/development.md shows under "Adding a stage" runs as written, on the
model-batch runner: every segment accepted or rejected, its array placed."""

import re

import numpy as np

from speechprep.core.modelstage import ShardFiles
from speechprep.io.jsonio import read_jsonl, write_jsonl
from tests.support import REPO, cpu_batch, demo_segments


def test_the_documented_stage_runs(tmp_path):
    doc = (REPO / "docs" / "development.md").read_text(encoding="utf-8")
    section = doc[doc.index("## Adding a stage") :]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    ns: dict = {}
    exec(compile(code, "development.md", "exec"), ns)
    segs = [*demo_segments(3), {"id": "gone", "audio_filepath": str(tmp_path / "none.wav"), "offset": 0, "duration": 1}]
    write_jsonl(tmp_path / "shard-0000.jsonl", segs)
    p = ns["LevelParams"]("cpu", cpu_batch(10.0), 0.1, {"first_errors": 10, "max_error_share": 0.5}, None)
    files = ShardFiles(
        str(tmp_path / "shard-0000.jsonl"),
        str(tmp_path / "out.jsonl"),
        str(tmp_path / "rejects.jsonl"),
        str(tmp_path / ".partial" / "shard-0000.jsonl"),
        {"frames": str(tmp_path / "frames")},
        "packed",
    )
    counts = ns["run"](files, p)
    lines, rejects = list(read_jsonl(tmp_path / "out.jsonl")), list(read_jsonl(tmp_path / "rejects.jsonl"))
    assert counts["ok"] == 3 and [(r["id"], r["reason"]) for r in rejects] == [("gone", "missing")]
    from speechprep.io.npyio import load_ref

    for line in lines:
        frames = load_ref(line["frames"], np.float32, 1)
        assert 0 < line["rms"] < 1 and len(frames) > 10 and line["frames"].startswith(str(tmp_path / "frames"))
