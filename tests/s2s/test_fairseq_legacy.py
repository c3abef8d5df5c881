"""The legacy fairseq checkpoint layer: each problem alone, all at once, a hostile pickle."""

import importlib
import inspect
import pickle
import re
import subprocess
import sys
import warnings
import zipfile
from pathlib import Path

import pytest
import torch
from fairseq import checkpoint_utils
from omegaconf.errors import ValidationError
from s2s_helpers import Hostile, checkpoint_naming

from speechprep.demo.s2s_models import LEGACY_PROBLEMS, checkpoint_state, save_checkpoint, tiny_hubert
from speechprep.io import safe_pickle
from speechprep.s2s import fairseq_legacy as legacy

warnings.simplefilter("ignore")
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def hubert(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("hubert")
    model, task, tcfg, mcfg = tiny_hubert(tmp / "labels")
    wav = torch.randn(2, 24000, generator=torch.Generator().manual_seed(0))
    modern = save_checkpoint(model, task, tcfg, mcfg, tmp / "modern.pt")
    m, _, _ = checkpoint_utils.load_model_ensemble_and_task([str(modern)])  # plain fairseq
    return tmp, (model, task, tcfg, mcfg), wav, features(m[0].eval(), wav)


def features(model, wav, layer=None):
    with torch.no_grad():
        x, _ = model.extract_features(wav, padding_mask=None, mask=False, output_layer=layer)
    return x


def check(hubert, name, plain_error, plain_match, **kw):
    tmp, parts, wav, reference = hubert
    return check_path(hubert, save_checkpoint(*parts, tmp / f"{name}.pt", **kw), plain_error, plain_match)


def check_path(hubert, path, plain_error, plain_match):
    tmp, parts, wav, reference = hubert
    with pytest.raises(plain_error, match=plain_match):  # the original failure
        checkpoint_utils.load_model_ensemble_and_task([str(path)])
    model, cfg, task, report = legacy.load(path)
    diff = (features(model, wav) - reference).abs().max().item()
    assert diff <= 1e-5, diff
    for layer in (1, 2):
        assert (features(model, wav, layer) - features(_modern(hubert), wav, layer)).abs().max() <= 1e-5
    return report


_MODERN = {}


def _modern(hubert):
    tmp = hubert[0]
    if tmp not in _MODERN:
        _MODERN[tmp] = legacy.load(tmp / "modern.pt")[0]
    return _MODERN[tmp]


def test_problem_1_pickled_classes(hubert):
    rep = check(hubert, "pickles", pickle.UnpicklingError, "Weights only load failed", problems=("pickles",))
    assert {"omegaconf.dictconfig.DictConfig", "fairseq.data.dictionary.Dictionary"} <= set(rep.allowed_globals)
    assert any(g.startswith("numpy") for g in rep.allowed_globals)
    assert not rep.int_casts and not rep.pos_conv


def test_problem_2_integers_stored_as_floats(hubert):
    rep = check(hubert, "float_ints", ValidationError, "could not be converted to Integer", problems=("float_ints",))
    assert "task.sample_rate: 16000.0 -> 16000" in rep.int_casts
    assert "model.encoder_layers: 2.0 -> 2" in rep.int_casts
    assert not rep.allowed_globals and not rep.pos_conv


@pytest.mark.parametrize("layout,what", [("dim0", "legacy g over dim 0"), ("param", "parametrizations g over dim 2")])
def test_problem_3_pos_conv_layout_converted_exactly(hubert, layout, what):
    rep = check(
        hubert,
        f"pos_conv_{layout}",
        RuntimeError,
        "Error\\(s\\) in loading state_dict",
        problems=("pos_conv",),
        pos_conv_layout=layout,
    )
    assert rep.pos_conv == [f"encoder.pos_conv.0: {what} -> legacy g over dim 2"]


def test_dropping_pos_conv_instead_changes_features(hubert):
    """Why exact conversion matters: the usual strict=False workaround is far off."""
    tmp, parts, wav, reference = hubert
    model, task, tcfg, mcfg = parts
    path = save_checkpoint(*parts, tmp / "drop.pt", problems=("pos_conv",))
    sd = torch.load(path, weights_only=True)["model"]
    sd = {k: v for k, v in sd.items() if "pos_conv" not in k}  # dropped, left as initialised
    fresh, _, _, _ = tiny_hubert(tmp / "labels2", seed=1)
    missing, _ = fresh.load_state_dict(sd, strict=False)
    assert missing and all("pos_conv" in k for k in missing)
    assert (features(fresh, wav) - reference).abs().max() > 1e-2


def test_all_three_at_once_args_style(hubert):
    rep = check(
        hubert,
        "all",
        pickle.UnpicklingError,
        "Weights only load failed",
        problems=("pickles", "float_ints", "pos_conv"),
        args_style=True,
    )
    assert rep.style == "args" and "argparse.Namespace" in rep.allowed_globals
    assert "args.encoder_layers: 2.0 -> 2" in rep.int_casts and rep.pos_conv


def test_modern_copy_loads_with_plain_fairseq_and_gives_the_same_features(hubert):
    tmp, parts, wav, reference = hubert
    path = save_checkpoint(
        *parts, tmp / "legacy_all.pt", problems=("pickles", "float_ints", "pos_conv"), args_style=True
    )
    out = tmp / "converted.pt"
    legacy.write_modern(path, out)
    assert legacy.checkpoint_globals(out) == []  # nothing but primitives and tensors
    models, _, _ = checkpoint_utils.load_model_ensemble_and_task([str(out)])  # plain fairseq
    assert (features(models[0].eval(), wav) - reference).abs().max() <= 1e-5


@pytest.mark.parametrize("legacy_format", [False, True], ids=["zip", "legacy_format"])
def test_disallowed_global_refused_and_nothing_executed(tmp_path, legacy_format):
    marker = tmp_path / "pwned"
    path = tmp_path / "evil.pt"
    torch.save(
        {"model": {}, "args": None, "cfg": {}, "x": Hostile(marker)},
        path,
        _use_new_zipfile_serialization=not legacy_format,
    )
    with pytest.raises(legacy.LegacyCheckpointError, match=r"refusing to load .*posix\.system"):
        legacy.load(path)
    assert not marker.exists()


@pytest.mark.parametrize("style", ["cfg", "args"])
def test_checkpoint_pickled_by_a_2021_stack(hubert, write_legacy, style):
    """numpy 1.x scalars and arrays, an OmegaConf 2.0 DictConfig (or argparse args),
    a Dictionary: pickled by numpy 1.26 / omegaconf 2.0.6, not by this stack."""
    tmp, parts, wav, reference = hubert
    state = checkpoint_state(*parts, problems=LEGACY_PROBLEMS, args_style=(style == "args"))
    path = write_legacy(state, tmp / f"2021_{style}.pt")
    rep = check_path(hubert, path, pickle.UnpicklingError, "Weights only load failed")
    assert {
        "numpy.core.multiarray.scalar",
        "numpy.core.multiarray._reconstruct",
        "fairseq.data.dictionary.Dictionary",
    } <= set(rep.allowed_globals)
    assert ("omegaconf.dictconfig.DictConfig" if style == "cfg" else "argparse.Namespace") in rep.allowed_globals
    assert rep.int_casts and rep.pos_conv
    state, _ = legacy.safe_load(path)
    assert float(state["extra_state"]["best_loss"]) == 1.2345
    assert state["extra_state"]["val_losses"].tolist() == [2.5, 1.75, 1.2345]
    assert state["task_state"]["dictionaries"][0].symbols == parts[1].dictionaries[0].symbols


def test_pre_1_6_torch_format_loads_safely(hubert, write_legacy):
    tmp, parts, wav, reference = hubert
    state = checkpoint_state(*parts, problems=LEGACY_PROBLEMS, args_style=True)
    path = write_legacy(state, tmp / "2021_legacy_format.pt", legacy_format=True)
    assert not zipfile.is_zipfile(path)
    rep = check_path(hubert, path, pickle.UnpicklingError, "Weights only load failed")
    assert "argparse.Namespace" in rep.allowed_globals and "numpy.core.multiarray.scalar" in rep.allowed_globals


def test_fp16_pos_conv_converted_once_and_kept_in_float32(hubert):
    tmp, _, wav, _ = hubert
    model, task, tcfg, mcfg = tiny_hubert(tmp / "labels_fp16")
    path = save_checkpoint(model.half(), task, tcfg, mcfg, tmp / "fp16.pt", problems=("pos_conv",))
    stored = torch.load(path, weights_only=True)["model"]
    g, v = stored["encoder.pos_conv.0.weight_g"].double(), stored["encoder.pos_conv.0.weight_v"].double()
    assert legacy._norm_dim(g) == 0 and stored["encoder.pos_conv.0.weight_v"].dtype == torch.float16
    weight = torch._weight_norm(v, g, 0)  # the true conv weight: torch's own weight norm
    converted, rep = legacy.load_state(path)
    assert rep.pos_conv == ["encoder.pos_conv.0: legacy g over dim 0 -> legacy g over dim 2"]
    # what the installed layout stores for that weight, rounded once, to float32
    assert torch.equal(converted["model"]["encoder.pos_conv.0.weight_v"], weight.float())
    assert torch.equal(converted["model"]["encoder.pos_conv.0.weight_g"], torch.norm_except_dim(weight, 2, 2).float())

    # the original fp16 model as the stage runs it (float32): its stored weights, pos_conv's
    # weight made from its stored g and v over dim 0
    original = model.float()
    with torch.no_grad():
        original.encoder.pos_conv[0].weight_v.copy_(weight)
        original.encoder.pos_conv[0].weight_g.copy_(torch.norm_except_dim(weight, 2, 2))
    reference = features(original.eval(), wav)
    loaded = legacy.load(path)[0]
    assert (features(loaded, wav) - reference).abs().max() <= 1e-5
    legacy.write_modern(path, tmp / "fp16_modern.pt")
    plain, _, _ = checkpoint_utils.load_model_ensemble_and_task([str(tmp / "fp16_modern.pt")])
    assert (features(plain[0].float().eval(), wav) - reference).abs().max() <= 1e-5


def _a_function_of(module: str) -> str:
    """A function (not a class) defined in or exported by ``module`` that ALLOWED does not name."""
    mod = importlib.import_module(safe_pickle._MOVED.get(module, module))
    names = sorted(
        n for n, v in vars(mod).items() if callable(v) and not isinstance(v, type) and n not in legacy.ALLOWED[module]
    )
    assert names, f"{module} has no functions"
    return f"{module}.{names[0]}"


@pytest.mark.parametrize("module", sorted(legacy.ALLOWED))
def test_a_function_from_any_allowed_module_is_refused(tmp_path, module):
    name = _a_function_of(module)
    path = checkpoint_naming(tmp_path / "f.pt", name)
    assert legacy.checkpoint_globals(path) == [name]
    with pytest.raises(legacy.LegacyCheckpointError, match=f"refusing to load .*{name}"):
        legacy.safe_load(path)


def test_only_classes_are_allowed_but_numpy_reconstruction(tmp_path):
    for module, names in legacy.ALLOWED.items():
        for name in names:
            obj = safe_pickle.resolve(module, name)
            assert isinstance(obj, type) or f"{module}.{name}" in safe_pickle.NUMPY_FUNCTIONS, (module, name)
    assert all(inspect.isclass(safe_pickle.resolve("numpy.dtypes", c)) for c in legacy.DTYPE_CLASSES)
    path = checkpoint_naming(tmp_path / "dtype_helper.pt", "numpy.dtypes._add_dtype_helper")
    with pytest.raises(legacy.LegacyCheckpointError, match=r"numpy\.dtypes\._add_dtype_helper"):
        legacy.safe_load(path)


def test_inspect_command_reports_and_writes_a_modern_copy(hubert):
    tmp, parts, wav, reference = hubert
    path = save_checkpoint(*parts, tmp / "cli.pt", problems=("pickles", "float_ints", "pos_conv"), args_style=True)
    out = tmp / "cli_modern.pt"
    p = subprocess.run(
        [sys.executable, "-m", "speechprep", "s2s", "inspect", str(path), "--write-modern", str(out)],
        capture_output=True,
        text=True,
        encoding="utf-8",
    )
    assert p.returncode == 0, p.stderr[-2000:]
    assert "config style: args" in p.stdout and "args.sample_rate: 16000.0 -> 16000" in p.stdout
    assert "legacy g over dim 0 -> legacy g over dim 2" in p.stdout and "argparse.Namespace" in p.stdout
    assert out.exists() and f"modern copy written to {out}" in p.stdout


def test_missing_file_is_named_as_missing(tmp_path):
    with pytest.raises(legacy.LegacyCheckpointError, match=r"nope\.pt: no such file"):
        legacy.load(tmp_path / "nope.pt")


def _bad_inputs(hubert, tmp_path):
    tmp, parts, wav, reference = hubert
    text = tmp_path / "notes.pt"
    text.write_text("not a checkpoint\n", encoding="utf-8")
    modern = (tmp / "modern.pt").read_bytes()
    truncated = tmp_path / "truncated.pt"
    truncated.write_bytes(modern[: len(modern) // 2])
    old = tmp_path / "old_format.pt"
    torch.save(checkpoint_state(*parts), old, _use_new_zipfile_serialization=False)
    truncated_old = tmp_path / "truncated_old_format.pt"
    truncated_old.write_bytes(old.read_bytes()[:3000])
    hostile = tmp_path / "hostile.pt"
    torch.save({"model": {}, "args": None, "cfg": {}, "x": Hostile(tmp_path / "pwned")}, hostile)
    return {
        "missing": (tmp_path / "missing.pt", "missing.pt: no such file"),
        "text": (text, "notes.pt: not a torch checkpoint"),
        "truncated": (truncated, "truncated.pt: truncated or damaged zip file"),
        "truncated_old_format": (truncated_old, "truncated_old_format.pt: truncated or damaged legacy"),
        "hostile": (hostile, "refusing to load .*hostile.pt: its pickle names posix.system"),
        "directory": (tmp_path, "is a directory"),
    }


def test_inspect_command_says_one_line_on_bad_input(hubert, tmp_path):
    for what, (path, message) in _bad_inputs(hubert, tmp_path).items():
        p = subprocess.run(
            [sys.executable, "-m", "speechprep", "s2s", "inspect", str(path)],
            capture_output=True,
            text=True,
            encoding="utf-8",
        )
        errors = [ln for ln in p.stderr.splitlines() if ln.startswith("error: ")]
        assert p.returncode != 0 and "Traceback" not in p.stderr, (what, p.stderr[-3000:])
        assert len(errors) == 1 and re.search(message, errors[0]), (what, p.stderr[-3000:])
        assert not p.stdout, (what, p.stdout)
    assert not (tmp_path / "pwned").exists()


def test_fine_tuned_ctc_modern_copy_loads_with_plain_fairseq_after_a_move(tmp_path, write_legacy):
    import shutil

    from fairseq import checkpoint_utils
    from s2s_helpers import tiny_wav2vec_ctc

    model, state = tiny_wav2vec_ctc(tmp_path / "build")
    symbols = list(state["task_state"]["target_dictionary"].symbols)
    path = write_legacy(state, tmp_path / "wav2vec_ctc_2021.pt")
    wav = torch.randn(2, 20000, generator=torch.Generator().manual_seed(1))

    def logits(m):
        with torch.no_grad():
            return m(source=wav, padding_mask=None)["encoder_out"]

    reference = logits(model)
    with pytest.raises(pickle.UnpicklingError, match="Weights only load failed"):
        checkpoint_utils.load_model_ensemble_and_task([str(path)])
    loaded, _, _, rep = legacy.load(path)
    assert (logits(loaded) - reference).abs().max() <= 1e-5 and rep.pos_conv

    copy = tmp_path / "here" / "asr.pt"
    copy.parent.mkdir()
    rep = legacy.write_modern(path, copy)
    assert legacy.checkpoint_globals(copy) == []
    models, _, task = checkpoint_utils.load_model_ensemble_and_task([str(copy)])  # plain fairseq, in place
    assert task.target_dictionary.symbols == symbols
    assert (logits(models[0].eval()) - reference).abs().max() <= 1e-5
    labels = copy.parent / "asr.pt.labels"
    assert rep.label_override == {"data": str(labels.resolve())}

    moved = tmp_path / "elsewhere"
    moved.mkdir()
    shutil.move(copy, moved / "asr.pt")
    shutil.move(labels, moved / "asr.pt.labels")
    models, _, task = checkpoint_utils.load_model_ensemble_and_task(  # plain fairseq, moved
        [str(moved / "asr.pt")], arg_overrides={"data": str(moved / "asr.pt.labels")}
    )
    assert task.target_dictionary.symbols == symbols
    assert (logits(models[0].eval()) - reference).abs().max() <= 1e-5


def test_a_2020_fine_tuned_ctc_model_with_nested_argparse_args(tmp_path, write_legacy):
    from fairseq import checkpoint_utils
    from hydra.errors import ConfigCompositionException
    from s2s_helpers import tiny_wav2vec_ctc_2020

    model, state = tiny_wav2vec_ctc_2020(tmp_path / "build")
    assert isinstance(state["args"].w2v_args, type(state["args"])) and state["cfg"] is None
    path = write_legacy(state, tmp_path / "wav2vec_ctc_2020.pt")
    wav = torch.randn(2, 20000, generator=torch.Generator().manual_seed(2))

    def logits(m):
        with torch.no_grad():
            return m(source=wav, padding_mask=None)["encoder_out"]

    reference = logits(model)
    # what plain fairseq does with those args once unpickled: the nested ones cannot be composed
    with pytest.raises(ConfigCompositionException, match=r"model\.w2v_args\."):
        checkpoint_utils._upgrade_state_dict(legacy.safe_load(path)[0])
    loaded, cfg, _, rep = legacy.load(path)
    assert rep.style == "args" and rep.nested_args == ["w2v_args"] and rep.pos_conv
    assert cfg.model.w2v_args.model._name == "wav2vec2" and cfg.model.w2v_args.common.no_progress_bar is True
    assert (logits(loaded) - reference).abs().max() <= 1e-5

    copy = tmp_path / "modern" / "asr.pt"
    copy.parent.mkdir()
    assert "nested argparse args converted to config: w2v_args" in legacy.write_modern(path, copy).lines()
    models, _, _ = checkpoint_utils.load_model_ensemble_and_task([str(copy)])  # plain fairseq
    assert (logits(models[0].eval()) - reference).abs().max() <= 1e-5
