"""The legacy fairseq checkpoint layer: each problem alone, all at once, a hostile pickle."""
import os
import pickle
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
import torch
from fairseq import checkpoint_utils
from omegaconf.errors import ValidationError

from speechprep import fairseq_legacy as legacy
from speechprep.s2s_demo_models import save_checkpoint, tiny_hubert

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
    path = save_checkpoint(*parts, tmp / f"{name}.pt", **kw)
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
    rep = check(hubert, "float_ints", ValidationError, "could not be converted to Integer",
                problems=("float_ints",))
    assert "task.sample_rate: 16000.0 -> 16000" in rep.int_casts
    assert "model.encoder_layers: 2.0 -> 2" in rep.int_casts
    assert not rep.allowed_globals and not rep.pos_conv


@pytest.mark.parametrize("layout,what", [("dim0", "legacy g over dim 0"),
                                         ("param", "parametrizations g over dim 2")])
def test_problem_3_pos_conv_layout_converted_exactly(hubert, layout, what):
    rep = check(hubert, f"pos_conv_{layout}", RuntimeError, "Error\\(s\\) in loading state_dict",
                problems=("pos_conv",), pos_conv_layout=layout)
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
    rep = check(hubert, "all", pickle.UnpicklingError, "Weights only load failed",
                problems=("pickles", "float_ints", "pos_conv"),
                args_style=True)
    assert rep.style == "args" and "argparse.Namespace" in rep.allowed_globals
    assert "args.encoder_layers: 2.0 -> 2" in rep.int_casts and rep.pos_conv


def test_modern_copy_loads_with_plain_fairseq_and_gives_the_same_features(hubert):
    tmp, parts, wav, reference = hubert
    path = save_checkpoint(*parts, tmp / "legacy_all.pt", problems=("pickles", "float_ints", "pos_conv"),
                           args_style=True)
    out = tmp / "converted.pt"
    legacy.write_modern(path, out)
    assert legacy.checkpoint_globals(out) == []  # nothing but primitives and tensors
    models, _, _ = checkpoint_utils.load_model_ensemble_and_task([str(out)])  # plain fairseq
    assert (features(models[0].eval(), wav) - reference).abs().max() <= 1e-5


class _Evil:
    def __reduce__(self):
        return (os.system, (f"touch {_Evil.marker}",))


def test_disallowed_global_refused_and_nothing_executed(tmp_path):
    _Evil.marker = tmp_path / "pwned"
    path = tmp_path / "evil.pt"
    torch.save({"model": {}, "args": None, "cfg": {}, "x": _Evil()}, path)
    with pytest.raises(legacy.LegacyCheckpointError, match=r"refusing to load .*posix\.system"):
        legacy.load(path)
    assert not _Evil.marker.exists()


def test_inspect_command_reports_and_writes_a_modern_copy(hubert):
    tmp, parts, wav, reference = hubert
    path = save_checkpoint(*parts, tmp / "cli.pt", problems=("pickles", "float_ints", "pos_conv"),
                           args_style=True)
    out = tmp / "cli_modern.pt"
    p = subprocess.run([sys.executable, str(REPO / "scripts" / "fairseq_checkpoint.py"), str(path),
                        "--write-modern", str(out)], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr[-2000:]
    assert "config style: args" in p.stdout and "args.sample_rate: 16000.0 -> 16000" in p.stdout
    assert "legacy g over dim 0 -> legacy g over dim 2" in p.stdout and "argparse.Namespace" in p.stdout
    assert out.exists() and f"modern copy written to {out}" in p.stdout
