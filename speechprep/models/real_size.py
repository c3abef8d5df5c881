"""Every stage's model at its real architecture and size, random weights, for measuring what a
lab's models cost (bench/workflow/real_size.py): NOT real models, never a default, never in the demo.

``python -m speechprep models build-real-size [--out DIR] [--only NAME ...]`` writes them into
``DIR`` (default :func:`default_dir`, a per-machine cache), skipping each whose file is there
already, and prints each one's parameter count and file size. The NeMo models are built in the
``asr`` environment (:mod:`.real_size_nemo`), the fairseq ones in the ``s2s`` environment
(:mod:`.real_size_fairseq`): a model whose library this interpreter lacks is built by the
sibling environment's interpreter (``<venvs>/<env>/bin/python``) when there is one.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
from pathlib import Path

from ..errors import UsageError
from . import real_size_fairseq, real_size_nemo

# name: (library, environment, file name)
MODELS = {name: ("nemo", "asr", spec[2]) for name, spec in real_size_nemo.MODELS.items()}
MODELS.update({name: ("fairseq", "s2s", file) for name, file in real_size_fairseq.FILES.items()})


def default_dir() -> Path:
    """``$XDG_CACHE_HOME/speechprep/real_size`` (``~/.cache/...``): built once per machine."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "speechprep" / "real_size"


def describe(path: Path) -> dict:
    """Parameter count (every tensor of the saved weights: BatchNorm statistics included; a
    k-means: its centres' values) and file size of a built model."""
    import tarfile

    import torch

    if path.suffix == ".bin":  # a k-means, loaded as the S2S stage loads it
        from ..s2s.models import load_kmeans_centers

        return {
            "file": str(path),
            "parameters": int(load_kmeans_centers(path).size),
            "file_mb": round(path.stat().st_size / 1e6, 1),
        }
    if path.suffix == ".nemo":
        with tarfile.open(path) as tar:
            member = next(m for m in tar.getmembers() if m.name.endswith("model_weights.ckpt"))
            state = torch.load(tar.extractfile(member), map_location="cpu", weights_only=True)
    else:  # loaded as strictly as the S2S stage loads it
        from ..s2s.fairseq_legacy import safe_load

        state = safe_load(path)[0]
        state = state.get("model") or state["generator"]
    params = sum(v.numel() for k, v in state.items() if torch.is_tensor(v) and "num_batches_tracked" not in k)
    return {"file": str(path), "parameters": params, "file_mb": round(path.stat().st_size / 1e6, 1)}


def _build_here(name: str, out: Path) -> Path:
    module = real_size_nemo if MODELS[name][0] == "nemo" else real_size_fairseq
    return module.build(name, out)


def _elsewhere(names: list[str], out_dir: Path) -> dict[str, dict]:
    """:func:`build` of ``names`` (one environment's) by that environment's interpreter."""
    from ..core.envspec import env_python

    env = MODELS[names[0]][1]
    python = env_python(env)
    if python is None:
        raise UsageError(f"{', '.join(names)} need the {env} environment: no .venvs/{env}; run this job there")
    cmd = [str(python), "-m", "speechprep", "models", "build-real-size", "--out", str(out_dir), "--only", *names]
    out = subprocess.run(cmd, check=True, cwd=Path(__file__).resolve().parents[2], stdout=subprocess.PIPE, text=True)
    return json.loads(out.stdout[out.stdout.index("\n{") :])


def build(out_dir: Path, only: list[str] | None = None) -> dict[str, dict]:
    """Build the models ``only`` names (all by default) into ``out_dir``, each unless its file is
    there; returns :func:`describe` of each by name (``built``: whether this call wrote it). Those
    whose library this interpreter lacks go to their own environment's (:func:`_elsewhere`)."""
    names = list(dict.fromkeys(only or MODELS))
    unknown = [n for n in names if n not in MODELS]
    if unknown:
        raise UsageError(f"no real-size model {', '.join(unknown)}; there are: {', '.join(MODELS)}")
    out_dir.mkdir(parents=True, exist_ok=True)
    here = {n for n in names if importlib.util.find_spec(MODELS[n][0]) is not None}
    done = {}
    for n in [n for n in names if n in here]:
        path = out_dir / MODELS[n][2]
        built = not path.is_file()
        if built:
            _build_here(n, path)
        done[n] = {**describe(path), "built": built}
    for env in dict.fromkeys(MODELS[n][1] for n in names if n not in here):
        done.update(_elsewhere([n for n in names if n not in here and MODELS[n][1] == env], out_dir))
    return {n: done[n] for n in names}


def main(out: str | None, only: list[str] | None) -> None:
    built = build(Path(out) if out else default_dir(), only)
    for name, info in built.items():
        print(f"{name:24s} {info['parameters'] / 1e6:9.1f} M parameters {info['file_mb']:9.1f} MB  {info['file']}")
    print("\n" + json.dumps(built, indent=1))
