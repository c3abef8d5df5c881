"""The S2S stage: batched features, quantizer, vocoder, a shard end to end."""
import io
import json
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
import torch
from s2s_helpers import Hostile

from speechprep import fairseq_legacy as legacy
from speechprep import s2s
from speechprep.jsonio import read_jsonl, write_jsonl
from speechprep.s2s_demo_models import build_demo, demo_audio, tiny_hubert, tiny_vocoder

warnings.simplefilter("ignore")
REPO = Path(__file__).resolve().parents[2]
DEMO = REPO / "resources" / "demo"
TRUTH = json.loads((DEMO / "truth.json").read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def demo_models(tmp_path_factory):
    out = tmp_path_factory.mktemp("s2s_models")
    return out, build_demo(DEMO / "truth.json", out)


@pytest.fixture(scope="module")
def models(demo_models):
    return s2s.Models(s2s.S2sParams(**demo_models[1], layer=2), "cpu", log=io.StringIO())


def segments(n=None, extra=()):
    segs = []
    for rel, info in sorted(TRUTH["files"].items()):
        if info.get("clean"):
            for k, sp in enumerate(info["speech"]):
                segs.append({"id": f"{rel.replace('/', '__').rsplit('.', 1)[0]}_{k:04d}",
                             "audio_filepath": str(DEMO / "audio" / rel),
                             "offset": sp["start"], "duration": round(sp["end"] - sp["start"], 3)})
    return (segs[:n] if n else segs) + list(extra)


@pytest.mark.parametrize("mode", ["default", "layer_norm"])
def test_batched_features_equal_one_at_a_time(tmp_path, mode):
    model, _, _, _ = tiny_hubert(tmp_path / "l", normalize=(mode == "layer_norm"))
    assert model.feature_extractor.conv_layers[0][-1].__class__.__name__ == "GELU"
    wavs = [torch.randn(n, generator=torch.Generator().manual_seed(n)) for n in (16000, 5200, 31337, 800)]
    batched = s2s.dense_features(model, wavs, 2, normalize=(mode == "layer_norm"))
    for w, b in zip(wavs, batched):
        x = torch.nn.functional.layer_norm(w, w.shape) if mode == "layer_norm" else w
        with torch.no_grad():
            single, _ = model.extract_features(x[None], padding_mask=None, mask=False, output_layer=2)
        assert b.shape == single[0].shape
        assert (b - single[0]).abs().max() <= 1e-5


def test_quantizer_labels_identical_to_sklearn(demo_models, models):
    import joblib

    km = joblib.load(demo_models[1]["kmeans"])
    feats = torch.cat(s2s.dense_features(models.hubert, demo_audio(DEMO / "truth.json")[:4], 2, False))
    assert (models.quantizer(feats) == km.predict(feats.numpy())).all()


def test_kmeans_loads_without_sklearn(demo_models):
    code = (f"import sys; sys.path.insert(0, {str(REPO)!r}); from speechprep.s2s import load_kmeans_centers; "
            f"c = load_kmeans_centers({demo_models[1]['kmeans']!r}); "
            "assert not any(m.split('.')[0] == 'sklearn' for m in sys.modules), 'sklearn imported'; "
            "print(c.shape)")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr[-2000:]
    assert p.stdout.strip() == "(50, 64)"


def _fitted_kmeans(n=16, seed=0):
    from sklearn.cluster import KMeans

    x = np.random.default_rng(seed).normal(size=(400, 12)).astype(np.float32)
    return KMeans(n_clusters=n, n_init=2, random_state=seed).fit(x), x


@pytest.mark.parametrize("compress", [0, 3, ("zlib", 3), ("gzip", 3), ("bz2", 3), ("lzma", 3), ("xz", 3), ("lz4", 3)],
                         ids=lambda c: str(c).replace(" ", ""))
def test_compressed_kmeans_files_load(tmp_path, compress):
    import joblib

    if compress == ("lz4", 3):
        pytest.importorskip("lz4", reason="joblib writes lz4 only when lz4 is installed (not pinned in the s2s env)")
    km, x = _fitted_kmeans()
    path = tmp_path / "km.bin"
    joblib.dump(km, path, compress=compress)
    centers = s2s.load_kmeans_centers(path)
    assert (s2s.Quantizer(centers)(torch.from_numpy(x)) == km.predict(x)).all()


def test_kmeans_written_by_2021_scikit_learn_and_joblib(tmp_path, legacy_python, models):
    from s2s_helpers import run_writer

    feats = torch.cat(s2s.dense_features(models.hubert, demo_audio(DEMO / "truth.json")[:6], 2, False))
    np.save(tmp_path / "feats.npy", feats.numpy())
    versions = json.loads(run_writer(legacy_python, "kmeans", tmp_path / "feats.npy", tmp_path / "km", 20, 0))
    assert versions["sklearn"].startswith("1.1.") and versions["joblib"].startswith("1.0.")
    labels = np.load(tmp_path / "km.labels.npy")  # that scikit-learn's own predict
    for name in ("km.bin", "km.zlib3.bin"):
        centers = s2s.load_kmeans_centers(tmp_path / name)
        assert centers.shape == (20, 64)
        assert (s2s.Quantizer(centers)(feats) == labels).all(), name


@pytest.mark.parametrize("compress", [0, 3])
@pytest.mark.parametrize("where", ["whole_file", "estimator_state", "object_array"])
def test_hostile_kmeans_file_refused_and_nothing_run(tmp_path, where, compress):
    import joblib

    marker = tmp_path / "pwned"
    km, _ = _fitted_kmeans()
    if where == "whole_file":
        obj = Hostile(marker)
    elif where == "estimator_state":
        km.extra_ = Hostile(marker)
        obj = km
    else:  # an object array: joblib pickles its items in a nested stream
        km.extra_ = np.array([Hostile(marker), 1], dtype=object)
        obj = km
    joblib.dump(obj, tmp_path / "km.bin", compress=compress)
    with pytest.raises(s2s.KmeansError, match=r"refusing to load .*km\.bin: its pickle names posix\.system"):
        s2s.load_kmeans_centers(tmp_path / "km.bin")
    assert not marker.exists()


def test_hostile_vocoder_checkpoint_refused_and_nothing_run(tmp_path, monkeypatch):
    from fairseq.models.text_to_speech.codehifigan import CodeGenerator

    marker = tmp_path / "pwned"
    tiny_vocoder(tmp_path / "v.pt", tmp_path / "v.json", 50)
    gen = torch.load(tmp_path / "v.pt", weights_only=True)["generator"]
    assert set(gen) == set(CodeGenerator(json.loads((tmp_path / "v.json").read_text(encoding="utf-8"))).state_dict())
    torch.save({"generator": gen, "x": Hostile(marker)}, tmp_path / "evil.pt")
    # what users set to load old fairseq checkpoints: torch.load then unpickles anything
    monkeypatch.setenv("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", "1")
    with pytest.raises(legacy.LegacyCheckpointError, match=r"refusing to load .*evil\.pt: its pickle names posix\.system"):
        s2s.load_vocoder(str(tmp_path / "evil.pt"), str(tmp_path / "v.json"), "cpu")
    assert not marker.exists()


def test_dedup_and_vocoder_lengths(tmp_path):
    assert s2s.dedup([3, 3, 1, 1, 1, 3]) == ([3, 1, 3], [2, 3, 1])
    for dur in (False, True):
        tiny_vocoder(tmp_path / f"v{dur}.pt", tmp_path / f"v{dur}.json", 50, dur_predictor=dur)
        voc, cfg = s2s.load_vocoder(str(tmp_path / f"v{dur}.pt"), str(tmp_path / f"v{dur}.json"), "cpu")
        units = [1, 1, 2, 3, 3, 3, 4]
        wav = s2s.synthesize(voc, units, dur, "cpu")
        hop = s2s.vocoder_hop(cfg)
        if dur:  # deduplicated units, durations predicted (at least one frame each)
            assert len(wav) % hop == 0 and len(wav) >= 4 * hop
        else:
            assert len(wav) == len(units) * hop == 7 * 320


def run(tmp_path, segs, params, tag="o", models=None):
    shard = tmp_path / f"{tag}.segments.jsonl"
    write_jsonl(shard, segs)
    out = {"units": tmp_path / f"{tag}.units.jsonl", "wavs": tmp_path / tag, "rej": tmp_path / f"{tag}.rej.jsonl"}
    log = io.StringIO()
    counts = s2s.run_shard(str(shard), str(out["units"]), str(out["wavs"]), str(out["rej"]), params,
                           str(tmp_path / ".partial" / f"{tag}.jsonl"), models=models, log=log)
    return counts, list(read_jsonl(out["units"])), list(read_jsonl(out["rej"])), out, log.getvalue()


def test_shard_units_wavs_and_bad_segments(tmp_path, demo_models, models):
    edge = DEMO / "audio" / "edge_cases"
    bad = [{"id": "corrupt_0000", "audio_filepath": str(edge / "corrupt.wav"), "offset": 0, "duration": 1.0},
           {"id": "nan_0000", "audio_filepath": str(edge / "nan_float.wav"), "offset": 0.2, "duration": 1.0},
           {"id": "past_end_0000", "audio_filepath": str(edge / "silence.wav"), "offset": 30, "duration": 1.0},
           {"id": "long_0000", "audio_filepath": str(edge / "silence.wav"), "offset": 0, "duration": 90.0}]
    segs = segments(6, bad)
    counts, lines, rejects, out, _ = run(tmp_path, segs, s2s.S2sParams(**demo_models[1], layer=2), models=models)
    assert {r["id"]: r["reason"] for r in rejects} == {"corrupt_0000": "unreadable", "nan_0000": "non_finite",
                                                      "past_end_0000": "empty", "long_0000": "too_long"}
    assert sorted([x["id"] for x in lines] + [r["id"] for r in rejects]) == sorted(s["id"] for s in segs)
    for line, seg in zip(lines, segs):
        assert line["id"] == seg["id"] and line["frame_rate"] == 50.0
        n = len(line["units"])
        samples = round(seg["duration"] * 16000)
        assert n == (samples - 400) // 320 + 1  # 50 Hz frames, 400-sample receptive field
        assert all(isinstance(u, int) and 0 <= u < 50 for u in line["units"])
        wav, sr = sf.read(out["wavs"] / f"{seg['id']}.wav")
        assert sr == 16000 and wav.ndim == 1 and len(wav) == n * 320
        assert s2s.dedup(line["units"]) == (line["dedup_units"], line["durations"])
        assert len(line["hubert_sha256"]) == 64


def test_units_from_legacy_checkpoint_and_its_modern_copy_are_identical(tmp_path, demo_models):
    paths = dict(demo_models[1])
    modern = tmp_path / "modern_hubert.pt"
    legacy.write_modern(paths["hubert"], modern)
    segs = segments(8)
    _, a, _, _, _ = run(tmp_path, segs, s2s.S2sParams(**paths, layer=2), tag="legacy")
    _, b, _, _, _ = run(tmp_path, segs, s2s.S2sParams(**{**paths, "hubert": str(modern)}, layer=2), tag="modern")
    assert [x["units"] for x in a] == [x["units"] for x in b]


def test_killed_shard_resumes_with_identical_outputs(tmp_path, demo_models, models):
    import shutil
    from dataclasses import asdict

    from speechprep.checkpoint import fingerprint

    params = s2s.S2sParams(**demo_models[1], layer=2)
    segs = segments(6)
    (tmp_path / "a").mkdir()
    _, full, _, out_a, _ = run(tmp_path / "a", segs, params, models=models)
    # what a job killed after three segments leaves: their checkpoint lines and scratch WAVs
    b = tmp_path / "b"
    b.mkdir()
    shard = b / "o.segments.jsonl"
    write_jsonl(shard, segs)
    ck = b / ".partial" / "o.jsonl"
    (b / ".partial" / "o").mkdir(parents=True)
    fp = fingerprint(str(shard), {**asdict(params), **s2s.identity(params)}, s2s.ALGORITHM_VERSION)
    lines = [json.dumps({"fingerprint": fp})]
    for x in full[:3]:
        lines.append(json.dumps({"id": x["id"], "units": x["units"], "wav_samples": x["wav_samples"]}))
        shutil.copy(out_a["wavs"] / f"{x['id']}.wav", b / ".partial" / "o" / f"{x['id']}.wav")
    ck.write_text("\n".join(lines) + "\n", encoding="utf-8")
    _, resumed, _, out_b, log = run(b, segs, params, models=models)
    assert "6 segments, 3 already done" in log and "3 to process" in log
    assert [(x["id"], x["units"]) for x in resumed] == [(x["id"], x["units"]) for x in full]
    for x in full:
        assert (out_b["wavs"] / f"{x['id']}.wav").read_bytes() == (out_a["wavs"] / f"{x['id']}.wav").read_bytes()
    assert not ck.exists()
