"""The plan's memory probe of the run-wide curation jobs (speechprep.workflow.probe): the
real job on synthetic inputs of a given size, in a fresh process, its peak memory read."""

import json
import subprocess
import sys

import numpy as np

from speechprep.core.config import defaults
from speechprep.curate import fingerprint as FP
from speechprep.curate.probe import GROUP, _fingerprints, _pool
from speechprep.jobs import job_params
from tests import real_speech as R
from tests.support import REPO


def probe(tmp_path, job, n, **like):
    out = tmp_path / f"{job.split()[1]}.{n}.json"
    params = job_params(job, defaults(REPO / "config" / "config.yaml"), "probe")
    cmd = [sys.executable, "-m", "speechprep", "probe", job, "--items", str(n), "--dir", str(tmp_path / "in")]
    cmd += ["--params", params, "--like", json.dumps(like), "--out", str(out)]
    p = subprocess.run(cmd, capture_output=True, text=True, encoding="utf-8", timeout=600)
    assert p.returncode == 0, (p.stdout + p.stderr)[-3000:]
    assert not (tmp_path / "in").exists()  # the inputs are gone with the probe
    return json.loads(out.read_text(encoding="utf-8"))


def test_the_speakers_probe_sees_the_sample_grow_with_the_segments(tmp_path):
    small, large = probe(tmp_path, "curate speakers", 1500), probe(tmp_path, "curate speakers", 12000)
    assert small["items"] == 1500 and small["cpu_s"] > 0
    # up to the config's sample of 8000 segments the clustering's distances grow with the square
    assert large["peak_rss_mb"] > small["peak_rss_mb"] + 100, (small, large)


def real_rows(folder):
    """Fingerprints of real recordings (the LibriVox reader, the cards speaker), as the
    measure job writes them for a shard."""
    rows = [FP.fingerprint(R.read(u.path, 16000)[0]) for u in (R.librivox() + R.cards())[:12]]
    folder.mkdir()
    np.save(folder / "shard-0000.fingerprint.npy", np.stack([r for r in rows if r is not None]))
    return np.load(folder / "shard-0000.fingerprint.npy")


def test_the_duplicates_probe_shapes_its_rows_on_the_pilots_real_fingerprints(tmp_path):
    pool = real_rows(tmp_path / "pilot")
    rows = _fingerprints(np.random.default_rng(0), 500, _pool(str(tmp_path / "pilot")))
    assert set(rows["n_anchors"]) <= set(pool["n_anchors"]) and set(rows["n_frames"]) <= set(pool["n_frames"])
    assert len(np.unique(rows["anchor_bits"].reshape(500, -1), axis=0)) == 500  # no two alike
    # in groups of GROUP: a group's members differ in about 28 % of their first anchor's bits,
    # as one speaker's utterances do; two groups in about half
    bits = np.unpackbits(rows["anchor_bits"][:, 0, :], axis=1)
    first = np.arange(0, 500, GROUP)
    within = np.mean([(bits[g] != bits[g + 1 : g + GROUP]).mean() for g in first])
    across = np.mean([(bits[g] != bits[first[first != g]]).mean() for g in first])
    assert 0.25 < within < 0.31 and 0.47 < across < 0.53, (within, across)
    got = probe(tmp_path, "curate duplicates", 3000, minhash_perm=64, fingerprints=str(tmp_path / "pilot"))
    assert got["items"] == 3000 and got["peak_rss_mb"] > 0 and got["seconds"] > 0
