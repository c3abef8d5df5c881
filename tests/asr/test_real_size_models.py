"""The real-size model builder (speechprep.models.real_size; bench/workflow/real_size.py measures its
models) still builds: its smallest model, TitaNet-L, through the command line."""

import json
import subprocess
import sys
import tarfile

import pytest
import yaml

from tests.support import REPO


def build(out, *names) -> dict:
    cmd = [sys.executable, "-m", "speechprep", "models", "build-real-size", "--out", str(out), "--only", *names]
    p = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    return json.loads(p.stdout[p.stdout.index("\n{") :])


@pytest.mark.slow
def test_build_real_size_titanet_large_then_keeps_it(tmp_path):
    first = build(tmp_path, "titanet-l")["titanet-l"]
    # titanet-large.yaml's size: 25.3 M parameters (its 16681-speaker training head included)
    assert first["built"] and 25.0e6 < first["parameters"] < 25.6e6, first
    with tarfile.open(first["file"]) as tar:
        cfg = yaml.safe_load(tar.extractfile("./model_config.yaml"))
    assert cfg["target"].endswith("EncDecSpeakerLabelModel") and cfg["decoder"]["emb_sizes"] == 192
    assert [b["filters"] for b in cfg["encoder"]["jasper"]] == [1024, 1024, 1024, 1024, 3072]
    # cached: a second call finds the file and builds nothing
    again = build(tmp_path, "titanet-l")["titanet-l"]
    assert not again["built"] and again["parameters"] == first["parameters"]
