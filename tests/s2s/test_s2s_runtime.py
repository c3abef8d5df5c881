"""S2S features through ONNX Runtime: equal to eager PyTorch, same units, checked and cached exports."""

import json
import os
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch

pytest.importorskip("onnxruntime", reason="onnxruntime is not in this S2S env (envs/s2s.yaml)")
pytest.importorskip("onnx", reason="onnx is not in this S2S env (envs/s2s.yaml)")

from speechprep.demo.corpus import demo_audio
from speechprep.demo.s2s_models import build_demo, save_checkpoint, tiny_hubert
from speechprep.errors import ModelFileError, UsageError
from speechprep.io.audio import read_segment
from speechprep.io.modelfiles import sha256_file
from speechprep.s2s import fairseq_legacy
from speechprep.s2s import runtime as rt
from tests.support import DEMO, demo_segments

warnings.simplefilter("ignore")
LAYER = 2  # the demo: layer 2 of a 2-layer model
TOL = rt.TOLERANCE


def eager(model, wav, layer=LAYER, normalize=False):
    """fairseq's extract_features, which s2s.dense_features equals (tests/s2s/test_s2s.py)."""
    w = torch.as_tensor(wav, dtype=torch.float32)
    if normalize:
        w = torch.nn.functional.layer_norm(w, w.shape)
    with torch.no_grad():
        return model.extract_features(w[None], padding_mask=None, mask=False, output_layer=layer)[0][0].numpy()


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    """The demo S2S HuBERT and k-means as speechprep.demo.s2s_models.build_demo makes them
    (2021-style legacy checkpoint, seed 0; the k-means on its criterion); its checked export;
    the model as the stage loads it."""
    import joblib

    out = tmp_path_factory.mktemp("s2s_runtime")
    paths = build_demo(DEMO / "truth.json", out)
    ckpt, km = Path(paths["hubert"]), joblib.load(paths["kmeans"])
    loaded = fairseq_legacy.load(ckpt)[0]
    export = out / "export" / "hubert-layer2.onnx"
    meta = rt.build_export(ckpt, LAYER, export)
    return {
        "ckpt": ckpt,
        "model": loaded,
        "km": km,
        "export": export,
        "meta": meta,
        "encoder": rt.load_encoder(export, sha256_file(ckpt), LAYER, threads=2),
    }


def demo_waveforms():
    return [read_segment(s, 16000) for s in demo_segments()]


def test_resolve_runtime():
    assert rt.resolve_runtime("auto", "cpu") == "onnxruntime"
    assert rt.resolve_runtime("auto", "cuda") == "torch"
    assert rt.resolve_runtime("auto", "cuda:1") == "torch"
    assert rt.resolve_runtime("torch", "cpu") == "torch"
    assert rt.resolve_runtime("onnxruntime", "cpu") == "onnxruntime"
    with pytest.raises(UsageError, match="CPU only"):
        rt.resolve_runtime("onnxruntime", "cuda")
    with pytest.raises(UsageError, match="openvino"):
        rt.resolve_runtime("openvino", "cpu")


def test_export_sidecar(demo):
    meta = demo["meta"]
    sha = sha256_file(demo["ckpt"])
    assert meta["checkpoint_sha256"] == sha and meta["layer"] == LAYER and meta["normalize"] is False
    assert meta["dim"] == 64 and meta["frame_rate"] == 50.0 and meta["min_samples"] == 400
    assert meta["max_abs_diff"] <= TOL and meta["onnx_sha256"] == sha256_file(demo["export"])
    assert json.loads(Path(f"{demo['export']}.json").read_text(encoding="utf-8")) == meta
    assert not [p for p in demo["export"].parent.iterdir() if p.name.startswith(".")]  # no temp files left


def test_features_equal_eager_on_demo_segments_and_a_60s_segment(demo):
    enc, model = demo["encoder"], demo["model"]
    wavs = demo_waveforms()
    pool = np.concatenate(demo_audio(DEMO / "truth.json"))
    assert len(pool) >= 60 * 16000
    long = pool[: 60 * 16000]
    worst = 0.0
    for w in [*wavs, long]:
        ref, got = eager(model, w), enc(w)
        assert got.shape == ref.shape and got.dtype == np.float32
        assert (len(w) - 400) // 320 + 1 == len(got)
        worst = max(worst, float(np.abs(got - ref).max()))
    assert worst <= TOL, worst
    # dense_features: what s2s.dense_features returns, for the stage's chunks of the 60 s segment
    chunks = [long[s : s + 25 * 16000] for s in range(0, len(long), 25 * 16000)]
    for f, w in zip(enc.dense_features(chunks), chunks, strict=True):
        assert isinstance(f, torch.Tensor) and f.dtype == torch.float32
        assert (f.numpy() - eager(model, w)).__abs__().max() <= TOL


def test_units_identical_on_demo(demo):
    """Nearest-centroid units from both paths. A unit may flip only where the two nearest
    centroids are equidistant within what the features moved (triangle inequality): any
    flip is counted and must be such a tie; on the demo there are none."""
    enc, model, km = demo["encoder"], demo["model"], demo["km"]
    c = km.cluster_centers_.astype(np.float32)
    frames, flips = 0, []
    for w in demo_waveforms():
        ref, got = eager(model, w), enc(w)
        a, b = km.predict(ref), km.predict(got)
        frames += len(a)
        for i in np.flatnonzero(a != b):
            d = np.linalg.norm(ref[i] - c, axis=1)
            moved = float(np.linalg.norm(ref[i] - got[i]))
            flips.append((abs(d[a[i]] - d[b[i]]), moved))
    assert frames > 1000
    assert all(gap <= 2 * moved for gap, moved in flips), flips
    assert not flips, f"{len(flips)} of {frames} units differ (all near-ties): {flips}"


@pytest.mark.parametrize("extractor", ["default", "layer_norm"])
def test_normalizing_checkpoint_and_short_inputs(tmp_path, extractor):
    """A checkpoint whose task normalises audio, layer_norm_first, the conv extractor in
    either mode (HuBERT large: layer_norm): the normalisation is in the export; odd and even
    frame counts; the shortest input; one shorter than the receptive field gives no frames
    (eager cannot run it)."""
    from omegaconf import OmegaConf

    model, task, tcfg, mcfg = tiny_hubert(tmp_path / "l", normalize=True, seed=3)
    if extractor == "layer_norm":
        mcfg.extractor_mode = "layer_norm"
        model = task.build_model(OmegaConf.structured(mcfg)).eval()
    ckpt = save_checkpoint(model, task, tcfg, mcfg, tmp_path / "norm.pt")
    meta = rt.build_export(ckpt, 1, tmp_path / "norm.onnx")
    assert meta["normalize"] is True
    enc = rt.load_encoder(tmp_path / "norm.onnx", layer=1)
    model = fairseq_legacy.load(ckpt)[0]
    assert type(model.feature_extractor.conv_layers[0][2]).__name__ == (
        "Fp32GroupNorm" if extractor == "default" else "Sequential"
    )
    for n in (400, 719, 720, 16000, 16320, 48123):
        w = (0.3 * np.random.default_rng(n).standard_normal(n) + 0.05).astype(np.float32)
        ref, got = eager(model, w, layer=1, normalize=True), enc(w)
        assert got.shape == ref.shape and np.abs(got - ref).max() <= TOL
    assert enc(np.zeros(399, np.float32)).shape == (0, 64)


def test_export_that_differs_is_refused(tmp_path, demo):
    out = tmp_path / "x.onnx"
    with pytest.raises(ModelFileError, match="differs from eager PyTorch"):
        rt.build_export(demo["ckpt"], LAYER, out, tolerance=1e-12)
    assert list(tmp_path.iterdir()) == []  # neither the export nor a temp file is left
    with pytest.raises(UsageError, match=r"layers 1\.\.2"):
        rt.build_export(demo["ckpt"], 3, out)


def test_an_export_of_another_checkpoint_layer_environment_or_damaged_is_refused(tmp_path, demo):
    ckpt, sha = demo["ckpt"], sha256_file(demo["ckpt"])
    path = tmp_path / "hubert.onnx"
    rt.build_export(ckpt, LAYER, path)
    assert rt.export_metadata(path, sha, LAYER)["onnx_sha256"] == sha256_file(path)
    with pytest.raises(ModelFileError, match="checkpoint_sha256"):
        rt.export_metadata(path, "0" * 64, LAYER)
    with pytest.raises(ModelFileError, match="layer"):
        rt.load_encoder(path, sha, 1)
    side = Path(f"{path}.json")
    meta = json.loads(side.read_text(encoding="utf-8"))
    side.write_text(json.dumps({**meta, "versions": {**meta["versions"], "onnxruntime": "0.0"}}), encoding="utf-8")
    with pytest.raises(ModelFileError, match="environment"):
        rt.export_metadata(path, sha, LAYER)
    side.write_text(json.dumps(meta), encoding="utf-8")
    data = bytearray(path.read_bytes())  # damage one byte of the weights
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))
    with pytest.raises(ModelFileError, match="not the file its sidecar"):
        rt.export_metadata(path, sha, LAYER)
    os.unlink(side)
    with pytest.raises(ModelFileError, match="no readable sidecar"):
        rt.load_encoder(path)
