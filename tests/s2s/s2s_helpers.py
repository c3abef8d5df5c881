"""Helpers of the S2S tests: fixtures written by a 2021 stack (legacy_writer.py in
.venvs/legacy_fixtures) and hostile pickles."""
import argparse
import os
import pickle
import subprocess
import types
from pathlib import Path

import numpy as np
import torch

REPO = Path(__file__).resolve().parents[2]
WRITER = Path(__file__).with_name("legacy_writer.py")


def run_writer(python, *args) -> str:
    p = subprocess.run([str(python), str(WRITER), *map(str, args)], capture_output=True, text=True,
                       encoding="utf-8", cwd=WRITER.parent)
    assert p.returncode == 0, p.stderr[-3000:]
    return p.stdout


def tagged(obj):
    """What an old trainer pickled as an object -> plain data tagged for legacy_writer.py."""
    from fairseq.data.dictionary import Dictionary
    from omegaconf import DictConfig, OmegaConf

    if isinstance(obj, argparse.Namespace):
        return {"__legacy__": "namespace", "value": {k: tagged(v) for k, v in vars(obj).items()}}
    if isinstance(obj, DictConfig):
        return {"__legacy__": "dictconfig", "value": OmegaConf.to_container(obj, resolve=False)}
    if isinstance(obj, Dictionary):
        return {"__legacy__": "dictionary", "value": dict(vars(obj))}
    if isinstance(obj, (np.ndarray, np.generic)):
        return {"__legacy__": "numpy", "value": obj.tolist(), "dtype": obj.dtype.str}
    if isinstance(obj, dict):
        new = {k: tagged(v) for k, v in obj.items()}
        return obj if all(new[k] is obj[k] for k in obj) else new  # keeps a state_dict's _metadata
    if isinstance(obj, (list, tuple)):
        new = [tagged(v) for v in obj]
        return obj if all(a is b for a, b in zip(new, obj)) else type(obj)(new)
    return obj


def checkpoint_naming(path: Path, full_name: str, legacy_format: bool = False) -> Path:
    """A torch checkpoint whose pickle calls ``full_name()``, whatever it names: a
    pickler that writes the GLOBAL as given (no module needs to hold it)."""
    module, _, name = full_name.rpartition(".")
    target = type("Target", (), {})

    class Pickler(pickle._Pickler):
        def save_global(self, obj, name_=None):
            if obj is target:
                self.write(pickle.GLOBAL + f"{module}\n{name}\n".encode("utf-8"))
            else:
                super().save_global(obj, name_)

    class Call:
        def __reduce__(self):
            return target, ()

    pickle_module = types.SimpleNamespace(__name__="pickle", Pickler=Pickler, dump=pickle.dump)
    torch.save({"model": {}, "args": None, "cfg": {}, "x": Call()}, path, pickle_module=pickle_module,
               _use_new_zipfile_serialization=not legacy_format)
    return path


class Hostile:
    """Unpickling it runs ``touch <marker>``."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return os.system, (f"touch {self.marker}",)
