"""Load legacy (2021-era) fairseq checkpoints exactly on modern PyTorch and OmegaConf.

HuBERT/mHuBERT and wav2vec 2.0 checkpoints from the fairseq examples and
textlesslib fail on today's stack in three ways. Each is fixed at its root,
before fairseq builds the model, and loading stays strict:

1. ``torch.load(weights_only=True)`` (PyTorch's default) rejects the classes
   old checkpoints pickle: ``argparse.Namespace``, OmegaConf containers,
   fairseq's ``Dictionary``, numpy scalars and dtypes. We list the globals a
   checkpoint names without running its pickle
   (``torch.serialization.get_unsafe_globals_in_checkpoint`` for the zip
   format, :mod:`pickletools` for the legacy format of torch < 1.6), allow
   exactly those that are in :data:`ALLOWED` (classes by name, and numpy's
   reconstruction functions), keyed by the name the pickle uses (numpy 1.x
   pickles say ``numpy.core``, numpy 2 has ``numpy._core``), and refuse the
   checkpoint, naming the global, if any other is there. There is no
   fallback to ``weights_only=False``. OmegaConf 2.0 ``DictConfig`` pickles
   load under OmegaConf 2.3 through its own ``__setstate__``.
2. Integer config fields stored as floats (``16000.0``, ``2.0``) make
   OmegaConf's structured merge fail. Integral floats are cast to ``int``
   where the target fairseq dataclass types the field ``int``, for ``cfg``
   checkpoints (per config group) and old ``args`` (argparse) checkpoints.
   OmegaConf itself is not patched.
3. ``encoder.pos_conv`` weight-norm tensors in another layout (``weight_g``
   normalised over dim 0 instead of 2, or ``parametrizations.weight.original0/1``)
   are converted exactly: ``W = g * v / ||v||`` from the stored layout, then
   re-split for the layout the installed fairseq builds, in float64, and kept
   in float32 (the precision the stage runs in) where the checkpoint stored
   fp16 or bf16: ``g`` and ``v`` rounded back to half precision would round the
   effective weight a second time (about 1e-3 off in the features).

:func:`inspect_checkpoint` reports what is legacy about a checkpoint;
:func:`write_modern` writes a copy that plain fairseq loads.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import pickletools
import re
import typing
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from ..errors import ModelFileError, describe
from ..io import safe_pickle
from ..io.safe_pickle import Allowlist

# module -> classes allowed from it, by name (and numpy's reconstruction functions)
ALLOWED: Allowlist = {
    "argparse": frozenset({"Namespace"}),
    "collections": frozenset({"OrderedDict", "defaultdict"}),
    "typing": frozenset({"Any"}),
    "builtins": frozenset(
        {"dict", "list", "tuple", "set", "frozenset", "int", "float", "str", "bool", "bytes", "complex", "object"}
    ),
    "omegaconf.dictconfig": frozenset({"DictConfig"}),
    "omegaconf.listconfig": frozenset({"ListConfig"}),
    "omegaconf.base": frozenset({"ContainerMetadata", "Metadata"}),
    "omegaconf.nodes": frozenset(
        {"AnyNode", "StringNode", "IntegerNode", "FloatNode", "BooleanNode", "EnumNode", "BytesNode", "PathNode"}
    ),
    "fairseq.data.dictionary": frozenset({"Dictionary"}),
    **safe_pickle.NUMPY,
}
# Unpickling a numpy.dtype yields an instance of one of these classes, which torch
# checks too although the pickle does not name it: plain data types only.
DTYPE_CLASSES = (
    "BoolDType",
    "Int8DType",
    "UInt8DType",
    "Int16DType",
    "UInt16DType",
    "Int32DType",
    "UInt32DType",
    "Int64DType",
    "UInt64DType",
    "LongLongDType",
    "ULongLongDType",
    "Float16DType",
    "Float32DType",
    "Float64DType",
    "LongDoubleDType",
    "Complex64DType",
    "Complex128DType",
    "CLongDoubleDType",
    "BytesDType",
    "StrDType",
    "DateTime64DType",
    "TimeDelta64DType",
)


class LegacyCheckpointError(ModelFileError):
    """A checkpoint that cannot or must not be loaded."""


@dataclass
class Report:
    """What was legacy about a checkpoint and what the loader did about it."""

    path: str
    allowed_globals: list[str] = field(default_factory=list)
    style: str = ""  # "cfg" or "args"
    int_casts: list[str] = field(default_factory=list)
    pos_conv: list[str] = field(default_factory=list)
    nested_args: list[str] = field(default_factory=list)  # argparse args nested in args (w2v_args)
    label_override: dict[str, str] = field(default_factory=dict)  # write_modern: where the labels went

    @property
    def legacy(self) -> bool:
        return bool(self.allowed_globals or self.int_casts or self.pos_conv or self.nested_args or self.style == "args")

    def lines(self) -> list[str]:
        out = [f"checkpoint: {self.path}", f"config style: {self.style}"]
        out.append("pickled globals allowed: " + (", ".join(self.allowed_globals) or "none"))
        out.append("integer fields stored as floats, cast: " + (", ".join(self.int_casts) or "none"))
        out.append("pos_conv weight norm converted: " + ("; ".join(self.pos_conv) or "no"))
        if self.nested_args:
            out.append("nested argparse args converted to config: " + ", ".join(self.nested_args))
        for key, where in self.label_override.items():
            out.append(
                f"label dictionaries: {where} (task.{key}); to move the copy, move them with it "
                f"and load it with arg_overrides={{'{key}': <their new directory>}}"
            )
        return out


# ---------------------------------------------------------------------------
# 1. safe loading
# ---------------------------------------------------------------------------
def checkpoint_globals(path: str | os.PathLike) -> list[str]:
    """Globals the checkpoint's pickle names beyond torch's own safe set, read without
    unpickling anything: torch's zip format, or the legacy format of torch < 1.6."""
    path = Path(path)
    if not path.exists():
        raise LegacyCheckpointError(f"{path}: no such file")
    if path.is_dir():
        raise LegacyCheckpointError(f"{path}: is a directory, not a checkpoint file")
    if zipfile.is_zipfile(path):
        try:
            return sorted(torch.serialization.get_unsafe_globals_in_checkpoint(str(path)))
        except Exception as e:  # noqa: BLE001 (a damaged archive: torch says what is wrong)
            raise LegacyCheckpointError(f"{path}: damaged torch checkpoint: {describe(e)}") from None
    with open(path, "rb") as f:
        if f.read(2) == b"PK":
            raise LegacyCheckpointError(f"{path}: truncated or damaged zip file, not a readable torch checkpoint")
    return _legacy_format_globals(path)


def _legacy_format_globals(path: Path) -> list[str]:
    """torch < 1.6 wrote pickles one after another: magic number, protocol version,
    system info, the object (storages as persistent ids), storage keys, then raw
    storages. List the globals of the pickles with pickletools, which runs nothing."""
    names: set[str] = set()
    with open(path, "rb") as f:
        try:
            magic = [arg for op, arg, _ in pickletools.genops(f) if op.name in ("LONG1", "LONG4")]
        except Exception:  # noqa: BLE001 (not a pickle at all)
            magic = []
        if magic != [torch.serialization.MAGIC_NUMBER]:
            raise LegacyCheckpointError(
                f"{path}: not a torch checkpoint (neither torch's zip format nor the legacy format of torch < 1.6)"
            )
        try:
            for _ in range(4):  # protocol version, system info, the object, storage keys
                for op, arg, _ in pickletools.genops(f):
                    if op.name in ("GLOBAL", "INST"):
                        names.add(arg.replace(" ", "."))
                    elif op.name == "STACK_GLOBAL":
                        raise LegacyCheckpointError(
                            f"{path}: its pickle uses protocol 4 globals, which weights-only loading cannot read"
                        )
        except LegacyCheckpointError:
            raise
        except Exception as e:  # noqa: BLE001 (pickletools: exhausted or unknown opcode)
            raise LegacyCheckpointError(f"{path}: truncated or damaged legacy torch checkpoint ({e})") from None
    # torch's own safe set, as get_unsafe_globals_in_checkpoint subtracts it for the zip format
    return sorted(names - set(torch._weights_only_unpickler._get_allowed_globals()))


def safe_load(path: str | os.PathLike) -> tuple[dict, list[str]]:
    """``torch.load(weights_only=True)`` allowing exactly the checkpoint's allowlisted globals."""
    names = checkpoint_globals(path)
    refused = [n for n in names if not safe_pickle.allowed(ALLOWED, *safe_pickle.split_global(n))]
    if refused:
        raise LegacyCheckpointError(
            f"refusing to load {path}: its pickle names {', '.join(refused)}, which "
            "speechprep.s2s.fairseq_legacy.ALLOWED does not allow (nothing was unpickled)"
        )
    # keyed by the name as the pickle spells it: torch matches (object, name) pairs by
    # that name, while a bare object goes by its real module, which for
    # numpy.core.multiarray.scalar is numpy._core.multiarray on numpy 2
    allow = [(safe_pickle.resolve(*safe_pickle.split_global(n)), n) for n in names]
    if "numpy.dtype" in names:
        allow += [(safe_pickle.resolve("numpy.dtypes", c), f"numpy.dtypes.{c}") for c in DTYPE_CLASSES]
    try:
        with torch.serialization.safe_globals(allow):
            state = torch.load(str(path), map_location="cpu", weights_only=True)
    except Exception as e:  # noqa: BLE001 (weights-only refusal or damaged data: one clear line)
        raise LegacyCheckpointError(f"{path}: cannot be loaded: {_weights_only_reason(e)}") from None
    if not isinstance(state, dict):
        raise LegacyCheckpointError(f"{path}: holds a {type(state).__name__}, not a checkpoint dict")
    return state, names


def _weights_only_reason(e: BaseException) -> str:
    """The informative line of a torch.load error (weights-only errors bury it mid-text)."""
    lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()]
    for ln in lines:
        if ln.startswith("WeightsUnpickler error:"):
            return ln
    return lines[0] if lines else type(e).__name__


# ---------------------------------------------------------------------------
# 2. integers stored as floats
# ---------------------------------------------------------------------------
def _is_int_type(t: Any) -> bool:
    if t is int:
        return True
    if typing.get_origin(t) is typing.Union:
        args = [a for a in typing.get_args(t) if a is not type(None)]
        return len(args) == 1 and args[0] is int
    return False


def _field_types(dc: type) -> dict[str, Any]:
    try:
        hints = typing.get_type_hints(dc)
    except Exception:  # noqa: BLE001 (unresolvable annotations: fall back to raw types)
        hints = {}
    return {f.name: hints.get(f.name, f.type) for f in dataclasses.fields(dc)}


def _group_dataclass(group: str, node: Any) -> type | None:
    """The fairseq dataclass a config group (``model``, ``task``, ``common``, ...) is merged into."""
    from fairseq.dataclass.configs import FairseqConfig
    from fairseq.models import MODEL_DATACLASS_REGISTRY
    from fairseq.registry import REGISTRIES
    from fairseq.tasks import TASK_DATACLASS_REGISTRY

    name = node.get("_name") if isinstance(node, dict) else None
    if group == "model" and name:
        return MODEL_DATACLASS_REGISTRY.get(name)
    if group == "task" and name:
        return TASK_DATACLASS_REGISTRY.get(name)
    if group in REGISTRIES and name:
        return REGISTRIES[group]["dataclass_registry"].get(name)
    t = _field_types(FairseqConfig).get(group)
    return t if dataclasses.is_dataclass(t) else None


def _cast_node(node: dict, dc: type, where: str, changes: list[str]) -> None:
    types = _field_types(dc)
    for k, v in list(node.items()):
        t = types.get(k)
        if isinstance(v, float) and v.is_integer() and t is not None and _is_int_type(t):
            node[k] = int(v)
            changes.append(f"{where}.{k}: {v!r} -> {int(v)}")
        elif isinstance(v, dict) and t is not None and dataclasses.is_dataclass(t):
            _cast_node(v, t, f"{where}.{k}", changes)


def cast_cfg(cfg: dict) -> list[str]:
    """Cast integral floats in a plain ``cfg`` dict, group by group. Returns what changed."""
    changes: list[str] = []
    for group, node in cfg.items():
        if isinstance(node, dict):
            dc = _group_dataclass(group, node)
            if dc is not None:
                _cast_node(node, dc, group, changes)
    return changes


def _args_dataclasses(args: argparse.Namespace) -> list[type]:
    from fairseq.dataclass.configs import FairseqConfig
    from fairseq.models import ARCH_MODEL_REGISTRY
    from fairseq.registry import REGISTRIES
    from fairseq.tasks import TASK_DATACLASS_REGISTRY

    dcs = [t for t in _field_types(FairseqConfig).values() if dataclasses.is_dataclass(t)]
    arch = getattr(args, "arch", None)
    if arch in ARCH_MODEL_REGISTRY and getattr(ARCH_MODEL_REGISTRY[arch], "__dataclass", None):
        dcs.append(ARCH_MODEL_REGISTRY[arch].__dataclass)
    if getattr(args, "task", None) in TASK_DATACLASS_REGISTRY:
        dcs.append(TASK_DATACLASS_REGISTRY[args.task])
    for group, reg in REGISTRIES.items():
        name = getattr(args, group, None)
        if isinstance(name, str) and name in reg["dataclass_registry"]:
            dcs.append(reg["dataclass_registry"][name])
    return dcs


def cast_args(args: argparse.Namespace) -> list[str]:
    """Cast integral floats in a flat argparse ``args`` where every dataclass
    declaring that field types it int (the flat namespace has no groups)."""
    int_fields: set[str] = set()
    other_fields: set[str] = set()
    for dc in _args_dataclasses(args):
        for name, t in _field_types(dc).items():
            (int_fields if _is_int_type(t) else other_fields).add(name)
    changes = []
    for k, v in vars(args).items():
        if isinstance(v, float) and v.is_integer() and k in int_fields and k not in other_fields:
            setattr(args, k, int(v))
            changes.append(f"args.{k}: {v!r} -> {int(v)}")
    return changes


# ---------------------------------------------------------------------------
# 3. pos_conv weight norm
# ---------------------------------------------------------------------------
_WN = re.compile(
    r"^(?P<prefix>.*pos_conv\.0)\.(?P<kind>weight_g|weight_v|parametrizations\.weight\.original0|"
    r"parametrizations\.weight\.original1)$"
)


def installed_pos_conv_layout() -> tuple[str, int]:
    """How the installed fairseq stores pos_conv: (``legacy`` | ``parametrizations``, norm dim)."""
    import warnings

    from fairseq.models.wav2vec.wav2vec2 import make_conv_pos

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sd = make_conv_pos(8, 6, 2).state_dict()  # channels 8, kernel 6, groups 2
    if "0.weight_g" in sd:
        return "legacy", _norm_dim(sd["0.weight_g"])
    return "parametrizations", _norm_dim(sd["0.parametrizations.weight.original0"])


def _norm_dim(g: torch.Tensor) -> int:
    big = [i for i, s in enumerate(g.shape) if s != 1]
    if len(big) != 1:
        raise LegacyCheckpointError(f"cannot tell the weight-norm dim of a g tensor of shape {tuple(g.shape)}")
    return big[0]


def convert_pos_conv(model_state: dict, target: tuple[str, int]) -> list[str]:
    """Rewrite pos_conv weight norm into ``target`` layout, in place. Returns what changed."""
    groups: dict[str, dict[str, torch.Tensor]] = {}
    for k in list(model_state):
        m = _WN.match(k)
        if m:
            groups.setdefault(m.group("prefix"), {})[m.group("kind")] = model_state[k]
    layout, dim = target
    changes = []
    for prefix, t in groups.items():
        if "weight_g" in t:
            src, g, v = "legacy", t["weight_g"], t["weight_v"]
        else:
            src, g, v = (
                "parametrizations",
                t["parametrizations.weight.original0"],
                t["parametrizations.weight.original1"],
            )
        src_dim = _norm_dim(g)
        if (src, src_dim) == (layout, dim):
            continue
        # the conv weight itself, in float64, kept in at least float32: an fp16 g and v would
        # round the weight they make once more
        g64, v64 = g.double(), v.double()
        w = v64 * (g64 / torch.norm_except_dim(v64, 2, src_dim))
        new_g, new_v = torch.norm_except_dim(w, 2, dim), w
        for kind in t:
            del model_state[f"{prefix}.{kind}"]
        names = (
            ("weight_g", "weight_v")
            if layout == "legacy"
            else ("parametrizations.weight.original0", "parametrizations.weight.original1")
        )
        dtype = torch.float32 if g.dtype in (torch.float16, torch.bfloat16) else g.dtype
        model_state[f"{prefix}.{names[0]}"] = new_g.to(dtype)
        model_state[f"{prefix}.{names[1]}"] = new_v.to(dtype)
        changes.append(f"{prefix}: {src} g over dim {src_dim} -> {layout} g over dim {dim}")
    return changes


# ---------------------------------------------------------------------------
# putting it together
# ---------------------------------------------------------------------------
def _plain(obj: Any) -> Any:
    """OmegaConf containers and Namespaces -> plain dicts/lists (values untouched)."""
    from omegaconf import DictConfig, ListConfig, OmegaConf

    if isinstance(obj, (DictConfig, ListConfig)):
        return _plain(OmegaConf.to_container(obj, resolve=False))
    if isinstance(obj, argparse.Namespace):
        return {k: _plain(v) for k, v in vars(obj).items()}
    if isinstance(obj, dict):
        return {k: _plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(_plain(v) for v in obj)
    return obj


def load_state(path: str | os.PathLike) -> tuple[dict, Report]:
    """The checkpoint's state, repaired for the installed fairseq, and a report."""
    state, allowed = safe_load(path)
    if "model" not in state or (state.get("args") is None and state.get("cfg") is None):
        raise LegacyCheckpointError(
            f"{path}: not a fairseq model checkpoint (it has no model with cfg or args; "
            f"keys: {', '.join(map(str, state))})"
        )
    rep = Report(str(path), allowed_globals=allowed)
    if state.get("args") is not None:
        rep.style = "args"
        rep.int_casts = cast_args(state["args"])
        state = _convert_nested_args(state, rep)
    if state.get("args") is None:
        rep.style = rep.style or "cfg"
        cfg = _plain(state["cfg"])
        rep.int_casts += cast_cfg(cfg)
        state["cfg"] = cfg
    rep.pos_conv = convert_pos_conv(state["model"], installed_pos_conv_layout())
    return state, rep


def _convert_nested_args(state: dict, rep: Report) -> dict:
    """An ``args`` checkpoint whose args hold another run's argparse args (a 2020 fine-tuned
    wav2vec 2.0 or HuBERT model keeps its pretraining run's as ``w2v_args``): fairseq turns
    the nested ``Namespace`` into ``model.w2v_args.<group>.<key>`` overrides of a field typed
    ``Any``, which Hydra cannot compose. Each nested one is converted the way fairseq converts
    the outer args (``convert_namespace_to_omegaconf``, integral floats cast first), the
    outer ones by fairseq's own checkpoint upgrade with the nested ones set aside, and the
    result is a ``cfg`` checkpoint holding both."""
    from fairseq import checkpoint_utils
    from fairseq.dataclass.utils import convert_namespace_to_omegaconf
    from omegaconf import OmegaConf

    args = state["args"]
    nested = {k: v for k, v in vars(args).items() if isinstance(v, argparse.Namespace)}
    if not nested:
        return state
    for key, inner in nested.items():
        rep.int_casts += [c.replace("args.", f"args.{key}.", 1) for c in cast_args(inner)]
        setattr(args, key, None)
    state = checkpoint_utils._upgrade_state_dict(state)  # the outer args -> cfg, as fairseq loads them
    cfg = _plain(state["cfg"])
    for key, inner in nested.items():
        cfg["model"][key] = _plain(
            OmegaConf.to_container(convert_namespace_to_omegaconf(inner), resolve=True, enum_to_str=True)
        )
    rep.nested_args = sorted(nested)
    return {**state, "cfg": cfg, "args": None}


def load(path: str | os.PathLike):
    """``(model, cfg, task, report)``: fairseq builds the model and loads it strictly."""
    from fairseq import checkpoint_utils
    from omegaconf import OmegaConf

    state, rep = load_state(path)
    if isinstance(state.get("cfg"), dict):
        state["cfg"] = OmegaConf.create(state["cfg"], flags={"allow_objects": True})
    state = checkpoint_utils._upgrade_state_dict(state)  # what load_checkpoint_to_cpu does next
    models, cfg, task = checkpoint_utils.load_model_ensemble_and_task([str(path)], state=state, strict=True)
    model = models[0].eval()
    return model, cfg, task, rep


def inspect_checkpoint(path: str | os.PathLike) -> Report:
    return load_state(path)[1]


def write_modern(path: str | os.PathLike, out: str | os.PathLike) -> Report:
    """A copy plain fairseq loads on this stack: primitives and tensors only.

    The config becomes a plain dict (ints as ints), pos_conv is in the
    installed layout, and the label dictionaries the task pickled (HuBERT's
    ``dictionaries``, a fine-tuned model's ``target_dictionary``) are written
    as ``dict.<label>.txt`` files in ``<out>.labels/``, with the task field
    fairseq reads them from pointing there: ``task.label_dir`` (HuBERT) or
    ``task.data`` (``audio_finetuning``). Optimizer state is dropped: this is
    an inference copy.

    A weights-only checkpoint cannot hold fairseq's ``Dictionary`` object, and
    fairseq resolves those paths against the working directory, not the
    checkpoint's: the copy stores the absolute path, and a copy moved with its
    ``.labels`` directory loads with ``arg_overrides={<that field>: <new
    .labels path>}`` (:attr:`Report.label_override` says which).
    """
    from fairseq import checkpoint_utils
    from fairseq.dataclass.utils import convert_namespace_to_omegaconf
    from omegaconf import OmegaConf

    from ..io.jsonio import atomic_open

    state, rep = load_state(path)
    if state.get("args") is not None:
        cfg = _plain(OmegaConf.to_container(convert_namespace_to_omegaconf(state["args"]), resolve=True))
    else:
        cfg = state["cfg"]
    out = Path(out)
    task_state = state.get("task_state") or {}
    dicts = task_state.get("dictionaries") or [d for d in [task_state.get("target_dictionary")] if d is not None]
    if dicts:
        label_dir = out.with_name(out.name + ".labels")
        labels = cfg["task"].get("labels") or [f"label{i}" for i in range(len(dicts))]
        for label, d in zip([labels] if isinstance(labels, str) else labels, dicts):
            with atomic_open(label_dir / f"dict.{label}.txt") as f:
                d.save(f)
        key = "label_dir" if "label_dir" in cfg["task"] else "data"
        cfg["task"][key] = str(label_dir.resolve())
        rep.label_override = {key: cfg["task"][key]}
    modern = {
        "cfg": cfg,
        "args": None,
        "model": state["model"],
        "optimizer_history": [
            {"criterion_name": "none", "optimizer_name": "none", "lr_scheduler_state": {}, "num_updates": 0}
        ],
        "extra_state": {"train_iterator": {"epoch": 0}},
    }
    with atomic_open(out, "wb") as f:
        torch.save(modern, f)
    checkpoint_utils.load_checkpoint_to_cpu(str(out))  # proves plain fairseq reads it
    return rep
