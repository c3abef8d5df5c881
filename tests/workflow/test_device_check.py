"""The device check (scripts/device_check.sh, bench/workflow/device_check.py) on its smallest CPU
path: a tiny TitaNet built from code, restored through the diarize stage's loader, over real
speech; every figure the GPU run prints is printed here too, from the same steps."""

import json
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_quick_cpu_path_prints_every_figure(tmp_path):
    out = tmp_path / "check.json"
    cmd = ["bash", "scripts/device_check.sh", "--quick", "--device", "cpu", "--dir", str(tmp_path), "--json", str(out)]
    p = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    text = p.stdout
    assert "NO CUDA DEVICE: the same steps on the CPU" in text
    r = json.loads(out.read_text(encoding="utf-8"))
    assert (r["device"], r["mode"]) == ("cpu", "quick")
    assert Path(r["build"]["files"]["titanet-tiny"]).is_file()  # built from code by the run
    [m] = r["models"]
    assert m["model"] == "titanet-tiny" and m["parameters"] > 0
    # the fixed part: each piece timed, their sum printed with its share of a 1-h shard
    assert all(m["fixed"][k] > 0 for k in ("import_s", "restore_s", "warmup_s"))
    assert 0 < m["fixed_share_of_1h_shard"] < 1
    assert f"= {m['fixed_s']:.1f} s" in text
    # memory per batch-second: the job's probe over three growing batches
    assert [s for s, _ in m["probe"]] == [2.0, 4.0, 8.0]
    assert m["probe"][-1][1] > 0 and m["mb_per_batch_s"]["largest_mb_per_s"] > 0
    # throughput through the job's batching: every segment done, its first batch a probe
    t = m["throughput"]
    assert t["done"] == t["segments"] and t["rtfx"] > 0 and t["probe"]["device"] == "cpu"
    # OOM halving under the job's memory guard: the batch was halved, every item has an outcome
    o = m["oom"]
    assert o["ooms"] >= 1 and "RLIMIT_DATA" in o["cap"]
    assert any("halving to" in line for line in o["log"]), o["log"]
    assert o["batch_done"] + o["batch_rejected_oom"] == o["batch_items"] == 8
    assert "| OOM on a batch of 8 (64.0 padded s): halving to 4 + 4" in text
    # the feed rate: four codecs of real recordings, per core and with every core
    f = r["feed"]
    assert len(f["per_codec"]) == 4 and all(v["audio_s"] > 0 and v["rate"] > 0 for v in f["per_codec"].values())
    assert f["per_core"] > 0 and f["all_cores"] > 0
    assert m["cores_to_feed"] == pytest.approx(t["rtfx"] / f["per_core"])
    assert "| titanet-tiny |" in text and "device check on cpu (quick): 1 of 1 models" in text
