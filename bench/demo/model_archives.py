"""The demo models built twice on one machine: the same bytes, and the .nemo still restores.

    python3 bench/demo/model_archives.py [--only asr|s2s] [--keep DIR]

Runs each demo model job of the workflow (``python -m speechprep demo asr-model``, ``demo
s2s-models``, as their rules run them, one thread) twice, in fresh processes of its own
environment, into two directories at different depths and with other hash seeds, and prints
each file's sha256 in both builds, whether they match, and, where they do not, which archive
members (tar) or records (torch's zip) differ. The demo ASR ``.nemo`` is then restored with
NeMo's ``restore_from`` and its tar members' mtimes, owners and modes are listed. Each job's
CPU seconds (user + system, ``getrusage`` of the child) are printed with it.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import resource
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
TRUTH = REPO / "resources" / "demo" / "truth.json"
JOBS = {
    "asr": ("asr", ["demo", "asr-model", "--truth", str(TRUTH), "--out", "{out}/demo_asr.nemo"]),
    "s2s": ("s2s", ["demo", "s2s-models", "--truth", str(TRUTH), "--out-dir", "{out}", "--threads", "1"]),
}
RESTORE = """
import sys
from nemo.collections.asr.models import ASRModel
m = ASRModel.restore_from(sys.argv[1], map_location="cpu")
print(type(m).__name__, sum(p.numel() for p in m.parameters()))
"""


def run_job(name: str, out: Path, seed: str) -> float:
    """The job ``name`` writing into ``out``: its CPU seconds."""
    env, args = JOBS[name]
    out.mkdir(parents=True, exist_ok=True)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    cmd = [str(REPO / ".venvs" / env / "bin" / "python"), "-m", "speechprep", *(a.format(out=out) for a in args)]
    environ = {**os.environ, "PYTHONHASHSEED": seed, "OMP_NUM_THREADS": "1"}
    done = subprocess.run(cmd, cwd=REPO, env=environ, capture_output=True, text=True)
    if done.returncode:
        sys.exit(f"{' '.join(cmd)} failed:\n{done.stderr[-3000:]}")
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return round(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime, 1)


def parts(path: Path) -> dict[str, str]:
    """A tar's members or a zip's records: {name: sha256}; {} for other files."""
    if tarfile.is_tarfile(path):
        with tarfile.open(path) as tar:
            return {m.name: hashlib.sha256(tar.extractfile(m).read()).hexdigest() for m in tar if m.isfile()}
    if zipfile.is_zipfile(path):
        with zipfile.ZipFile(path) as z:
            return {n: hashlib.sha256(z.read(n)).hexdigest() for n in z.namelist()}
    return {}


def compare(a: Path, b: Path) -> list[dict]:
    rows = []
    for p in sorted(x for x in a.iterdir() if x.is_file()):
        q = b / p.name
        one, two = hashlib.sha256(p.read_bytes()).hexdigest(), hashlib.sha256(q.read_bytes()).hexdigest()
        row = {"file": p.name, "bytes": p.stat().st_size, "build 1": one, "build 2": two, "same": one == two}
        if one != two:
            pa, pb = parts(p), parts(q)
            row["differing parts"] = sorted(k for k in pa.keys() | pb.keys() if pa.get(k) != pb.get(k))
        rows.append(row)
    return rows


def nemo_facts(path: Path) -> dict:
    with tarfile.open(path) as tar:
        attrs = sorted({(m.mtime, m.uid, m.gid, m.uname, m.gname, oct(m.mode)) for m in tar})
        names = [m.name for m in tar]
    python = REPO / ".venvs" / "asr" / "bin" / "python"
    done = subprocess.run([str(python), "-c", RESTORE, str(path)], cwd=REPO, capture_output=True, text=True)
    restored = done.stdout.strip().splitlines()[-1] if done.returncode == 0 else f"FAILED: {done.stderr[-500:]}"
    return {"members": names, "(mtime, uid, gid, uname, gname, mode)": attrs, "restore_from": restored}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--only", choices=sorted(JOBS), action="append")
    ap.add_argument("--keep", type=Path, help="build into DIR/1 and DIR/2/deeper and keep them")
    args = ap.parse_args()
    root = args.keep or Path(tempfile.mkdtemp(prefix="model_archives."))
    dirs = (root / "1", root / "2" / "deeper")
    report = {}
    for name in args.only or sorted(JOBS):
        cpu = [run_job(name, d / name, seed) for d, seed in zip(dirs, ("1", "2"))]
        report[name] = {"cpu_seconds": cpu, "files": compare(dirs[0] / name, dirs[1] / name)}
        if name == "asr":
            report[name]["demo_asr.nemo"] = nemo_facts(dirs[1] / name / "demo_asr.nemo")
    print(json.dumps(report, indent=1))
    same = all(f["same"] for r in report.values() for f in r["files"])
    print("every demo model byte-identical in both builds" if same else "SOME DEMO MODELS DIFFER")
    if not args.keep:
        import shutil

        shutil.rmtree(root, ignore_errors=True)
    sys.exit(0 if same else 1)


if __name__ == "__main__":
    main()
