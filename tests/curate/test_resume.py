"""The measure job, run through the CLI, killed with SIGKILL mid-shard, resumes: only the
unfinished segments are measured again, and the outputs equal an uninterrupted run's."""

import json
import re
import subprocess
import sys
from dataclasses import asdict

import numpy as np
import pytest
from conftest import asr_lines, measure_params

from speechprep.io.jsonio import read_jsonl, write_jsonl
from tests.support import REPO, cpu_batch, kill_when_checkpointed

PATHS = ("embedding_file", "minhash_file")
MODEL_SCORES = ("dnsmos_sig", "dnsmos_bak", "dnsmos_ovrl", "dnsmos_p808")


def drop(line: dict, keys) -> dict:
    return {k: v for k, v in line.items() if k not in keys}


def command(root, params):
    c = root / "curate"
    return [
        sys.executable,
        "-m",
        "speechprep",
        "curate",
        "measure",
        "--segments",
        str(root / "asr" / "shard-0000.jsonl"),
        "--units",
        str(root / "s2s" / "shard-0000.units.jsonl"),
        "--params",
        json.dumps(params),
        "--threads",
        "2",
        "--resume",
        str(c / ".partial" / "shard-0000.jsonl"),
        "--out",
        str(c / "shard-0000.measures.jsonl"),
        "--embeddings",
        str(c / "shard-0000.embeddings.npy"),
        "--minhash",
        str(c / "shard-0000.minhash.npy"),
        "--fingerprint",
        str(c / "shard-0000.fingerprint.npy"),
        "--rejects",
        str(c / "shard-0000.measure_rejects.jsonl"),
    ]


def setup(root, segs):
    write_jsonl(root / "asr" / "shard-0000.jsonl", segs)
    write_jsonl(
        root / "s2s" / "shard-0000.units.jsonl",
        [
            {"id": s["id"], "units": [(i * 7 + k) % 50 for i in range(60)], "frame_rate": 50.0}
            for k, s in enumerate(segs)
        ],
    )


def outputs(root):
    c = root / "curate"
    lines = [{k: v for k, v in x.items() if k not in PATHS} for x in read_jsonl(c / "shard-0000.measures.jsonl")]
    return (
        lines,
        list(read_jsonl(c / "shard-0000.measure_rejects.jsonl")),
        np.load(c / "shard-0000.embeddings.npy"),
        np.load(c / "shard-0000.minhash.npy"),
        np.load(c / "shard-0000.fingerprint.npy").tobytes(),
    )


@pytest.mark.slow
def test_sigkilled_measure_job_resumes(tmp_path):
    segs = asr_lines(16)
    params = asdict(measure_params(batch=cpu_batch(3.0)))
    killed, clean = tmp_path / "killed", tmp_path / "clean"
    for root in (killed, clean):
        setup(root, segs)
    resume = killed / "curate" / ".partial" / "shard-0000.jsonl"
    proc = subprocess.Popen(
        command(killed, params), cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
    )
    done = kill_when_checkpointed(proc, resume, 6)
    assert 6 <= done < len(segs)
    assert not (killed / "curate" / "shard-0000.measures.jsonl").exists()

    again = subprocess.run(command(killed, params), cwd=REPO, capture_output=True, text=True, encoding="utf-8")
    assert again.returncode == 0, again.stderr[-3000:]
    m = re.search(r"(\d+) segments, (\d+) already done or screened out .*, (\d+) to process", again.stderr)
    assert m, again.stderr[-3000:]
    total, saved, todo = map(int, m.groups())
    assert total == len(segs) and saved >= done and todo == total - saved  # finished segments not measured again
    assert not resume.exists()

    ref = subprocess.run(command(clean, params), cwd=REPO, capture_output=True, text=True, encoding="utf-8")
    assert ref.returncode == 0, ref.stderr[-3000:]
    a, b = outputs(killed), outputs(clean)
    # the models score a batch of clips at once, and the resumed job's batches are not the
    # clean run's: float sums in another order (seen: Resemblyzer 1.4e-7 on one row of 16,
    # DNSMOS P.808 up to 8e-8); every other measure, exactly
    assert [drop(x, MODEL_SCORES) for x in a[0]] == [drop(x, MODEL_SCORES) for x in b[0]] and a[1] == b[1]
    scores = lambda lines: np.array([[x[k] for k in MODEL_SCORES] for x in lines])
    assert np.allclose(scores(a[0]), scores(b[0]), rtol=0, atol=1e-6)
    assert np.allclose(a[2], b[2], rtol=0, atol=1e-6) and np.array_equal(a[3], b[3])
