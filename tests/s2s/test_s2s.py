"""The S2S stage: batched features, quantizer, vocoder, a shard end to end."""

import json
import subprocess
import sys
import warnings
from dataclasses import asdict, replace
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
import torch
from s2s_helpers import Hostile

from speechprep.core.artifacts import read_wav
from speechprep.core.modelstage import ShardFiles
from speechprep.demo.corpus import demo_audio
from speechprep.demo.s2s_models import build_demo, tiny_hubert, tiny_vocoder
from speechprep.errors import UsageError
from speechprep.io.jsonio import read_jsonl, write_jsonl
from speechprep.s2s import fairseq_legacy as legacy
from speechprep.s2s import models as s2s
from speechprep.s2s import stage
from tests.support import DEMO, demo_segments
from tests.support import params as config_params

warnings.simplefilter("ignore")


@pytest.fixture(scope="module")
def demo_models(tmp_path_factory):
    out = tmp_path_factory.mktemp("s2s_models")
    return out, build_demo(DEMO / "truth.json", out)


@pytest.fixture(scope="module")
def models(demo_models):
    return s2s.Models(params(demo_models), "cpu")


def params(demo_models, **kw):
    """The demo models with the config defaults (layer 2: the demo HuBERT has two);
    PyTorch features unless ``runtime`` says otherwise."""
    return config_params(s2s.S2sParams, **{**demo_models[1], "layer": 2, "runtime": "torch", "device": "cpu", **kw})


def segments(n=None, extra=()):
    return demo_segments(n) + list(extra)


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
    code = (
        "import sys; from speechprep.s2s.models import load_kmeans_centers; "
        f"c = load_kmeans_centers({demo_models[1]['kmeans']!r}); "
        "assert not any(m.split('.')[0] == 'sklearn' for m in sys.modules), 'sklearn imported'; "
        "print(c.shape)"
    )
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr[-2000:]
    assert p.stdout.strip() == "(50, 64)"


def _fitted_kmeans(n=16, seed=0):
    from sklearn.cluster import KMeans

    x = np.random.default_rng(seed).normal(size=(400, 12)).astype(np.float32)
    return KMeans(n_clusters=n, n_init=2, random_state=seed).fit(x), x


@pytest.mark.parametrize(
    "compress",
    [0, 3, ("zlib", 3), ("gzip", 3), ("bz2", 3), ("lzma", 3), ("xz", 3), ("lz4", 3)],
    ids=lambda c: str(c).replace(" ", ""),
)
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


SKLEARN_024 = Path(__file__).parent / "fixtures" / "sklearn024"


@pytest.mark.parametrize(
    "name", ["partial_fit.bin", "partial_fit.zlib3.bin", "random_state.bin", "random_state.zlib3.bin"]
)
def test_kmeans_with_its_random_state_written_by_scikit_learn_0_24(name):
    """MiniBatchKMeans of scikit-learn 0.24.2 / numpy 1.26.4 / joblib 1.0.1 (fixtures/sklearn024/make.py)
    keeps its RandomState in the pickle: it loads, and quantizes as that scikit-learn predicted."""
    versions = json.loads((SKLEARN_024 / "versions.json").read_text(encoding="utf-8"))
    assert versions == {"sklearn": "0.24.2", "numpy": "1.26.4", "joblib": "1.0.1"}
    x = np.load(SKLEARN_024 / "features.npy")
    labels = np.load(SKLEARN_024 / f"{name.split('.')[0]}.labels.npy")
    centers = s2s.load_kmeans_centers(SKLEARN_024 / name)
    assert centers.shape == (12, 16)
    assert (s2s.Quantizer(centers)(torch.from_numpy(x)) == labels).all()


class _HostileRandomState:
    """Unpickling it would build a RandomState with ``os.system`` as its bit generator's constructor."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        import importlib
        import os

        ctor = vars(importlib.import_module("numpy.random._pickle"))["__randomstate_ctor"]
        return ctor, (f"touch {self.marker}", os.system)


def test_a_random_state_constructor_given_another_callable_is_refused(tmp_path):
    import joblib

    km, _ = _fitted_kmeans()
    km._random_state = _HostileRandomState(tmp_path / "pwned")
    joblib.dump(km, tmp_path / "km.bin")
    with pytest.raises(s2s.KmeansError, match=r"its pickle names posix\.system"):
        s2s.load_kmeans_centers(tmp_path / "km.bin")
    assert not (tmp_path / "pwned").exists()


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
    with pytest.raises(
        legacy.LegacyCheckpointError, match=r"refusing to load .*evil\.pt: its pickle names posix\.system"
    ):
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


def run(tmp_path, segs, p, tag="o", models=None, layout="files"):
    shard = tmp_path / f"{tag}.segments.jsonl"
    write_jsonl(shard, segs)
    out = {"units": tmp_path / f"{tag}.units.jsonl", "wavs": tmp_path / tag, "rej": tmp_path / f"{tag}.rej.jsonl"}
    resume = str(tmp_path / ".partial" / f"{tag}.jsonl")
    files = ShardFiles(str(shard), str(out["units"]), str(out["rej"]), resume, {"wav": str(out["wavs"])}, layout)
    counts = stage.run(files, replace(p, layout=layout), models=models)
    return counts, list(read_jsonl(out["units"])), list(read_jsonl(out["rej"])), out


def test_shard_units_wavs_and_bad_segments(tmp_path, demo_models, models):
    edge = DEMO / "audio" / "edge_cases"
    bad = [
        {"id": "corrupt_0000", "audio_filepath": str(edge / "corrupt.wav"), "offset": 0, "duration": 1.0},
        {"id": "nan_0000", "audio_filepath": str(edge / "nan_float.wav"), "offset": 0.2, "duration": 1.0},
        {"id": "past_end_0000", "audio_filepath": str(edge / "silence.wav"), "offset": 30, "duration": 1.0},
        {"id": "long_0000", "audio_filepath": str(edge / "silence.wav"), "offset": 0, "duration": 90.0},
    ]
    segs = segments(6, bad)
    counts, lines, rejects, out = run(tmp_path, segs, params(demo_models), models=models)
    assert {r["id"]: r["reason"] for r in rejects} == {
        "corrupt_0000": "unreadable",
        "nan_0000": "non_finite",
        "past_end_0000": "empty",
        "long_0000": "too_long",
    }
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


def test_packed_layout_one_wav_per_shard_same_audio(tmp_path, demo_models, models):
    segs = segments(5)
    _, files, _, out_f = run(tmp_path, segs, params(demo_models), "f", models=models)
    _, packed, _, out_p = run(tmp_path, segs, params(demo_models), "p", models=models, layout="packed")
    assert [p.name for p in out_p["wavs"].iterdir()] == ["packed.wav"]
    info = sf.info(out_p["wavs"] / "packed.wav")
    assert info.samplerate == 16000 and info.subtype == "PCM_16"
    assert info.frames == sum(x["wav_samples"] for x in packed)
    start = 0
    for f, p in zip(files, packed, strict=True):
        assert p["wav"] == f"{out_p['wavs'] / 'packed.wav'}#{start}:{p['wav_samples']}"
        start += p["wav_samples"]
        assert np.array_equal(read_wav(p["wav"]), read_wav(f["wav"]))  # sample for sample
        assert {k: v for k, v in p.items() if k != "wav"} == {k: v for k, v in f.items() if k != "wav"}
    assert not (tmp_path / ".partial" / "p").exists()


def test_a_shard_that_lost_a_segment_reuses_the_rest_sample_for_sample(tmp_path, demo_models, models, caplog):
    """Packed: the reused WAVs come back out of the linked packed file, the same samples."""
    segs = segments(5)
    _, first, _, _ = run(tmp_path, segs, params(demo_models), "p", models=models, layout="packed")
    wavs = {x["id"]: read_wav(x["wav"]) for x in first}
    caplog.set_level("INFO")
    _, again, _, _ = run(tmp_path, segs[1:], params(demo_models), "p", models=None, layout="packed")
    assert "4 of 4 segments reused from the store" in caplog.text and "loaded on" not in caplog.text
    assert [x["units"] for x in again] == [x["units"] for x in first[1:]]
    for x in again:
        assert np.array_equal(read_wav(x["wav"]), wavs[x["id"]]), x["id"]


def test_units_from_legacy_checkpoint_and_its_modern_copy_are_identical(tmp_path, demo_models):
    paths = dict(demo_models[1])
    modern = tmp_path / "modern_hubert.pt"
    legacy.write_modern(paths["hubert"], modern)
    segs = segments(8)
    _, a, _, _ = run(tmp_path, segs, params(demo_models), tag="legacy")
    _, b, _, _ = run(tmp_path, segs, params(demo_models, hubert=str(modern)), tag="modern")
    assert [x["units"] for x in a] == [x["units"] for x in b]


def test_killed_shard_resumes_with_identical_outputs(tmp_path, demo_models, models, caplog):
    import shutil

    from speechprep.core.resume import fingerprint
    from speechprep.core.reuse import item_key
    from speechprep.core.shardjob import KEY

    p = params(demo_models)
    segs = segments(6)
    (tmp_path / "a").mkdir()
    _, full, _, out_a = run(tmp_path / "a", segs, p, models=models)
    # what a job killed after three segments leaves: their resume lines and scratch WAVs
    b = tmp_path / "b"
    b.mkdir()
    shard = b / "o.segments.jsonl"
    write_jsonl(shard, segs)
    ck = b / ".partial" / "o.jsonl"
    (b / ".partial" / "o" / "wav").mkdir(parents=True)
    job = stage.S2sStage(p, models=models)
    fp = fingerprint(str(shard), job.fingerprint(), job.version)
    lines = [json.dumps({"fingerprint": fp})]
    key = {s["id"]: item_key(s, s["audio_filepath"]) for s in segs}  # the item's key, as the job writes it
    for x in full[:3]:
        saved = {k: x[k] for k in ("units", "frame_rate", "wav_samples")}
        lines.append(json.dumps({"id": x["id"], **saved, KEY: key[x["id"]]}))
        shutil.copy(out_a["wavs"] / f"{x['id']}.wav", b / ".partial" / "o" / "wav" / f"{x['id']}.wav")
    ck.write_text("\n".join(lines) + "\n", encoding="utf-8")
    caplog.set_level("INFO")
    _, resumed, _, out_b = run(b, segs, p, models=models)
    assert "6 segments, 3 already done or screened out" in caplog.text and "3 to process" in caplog.text
    assert [(x["id"], x["units"]) for x in resumed] == [(x["id"], x["units"]) for x in full]
    for x in full:
        assert (out_b["wavs"] / f"{x['id']}.wav").read_bytes() == (out_a["wavs"] / f"{x['id']}.wav").read_bytes()
    assert not ck.exists()


class _FailOn:
    """A forward hook on the real HuBERT's conv extractor that raises for chosen input lengths."""

    def __init__(self, model, lengths=None):
        self.lengths = lengths  # None: every input
        self.handle = model.hubert.feature_extractor.register_forward_hook(self)

    def __call__(self, module, args, output):
        n = args[0].shape[-1]
        if self.lengths is None or n in self.lengths:
            raise RuntimeError(f"synthetic failure on {n} samples")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.handle.remove()


def _samples(seg):
    from speechprep.io.audio import read_segment

    return len(read_segment(seg, 16000, 0.1, "s2s.min_duration"))


def test_model_error_on_one_segment_rejects_only_that_one(tmp_path, demo_models, models, caplog):
    segs = segments(6)
    guilty = segs[2]
    with _FailOn(models, {_samples(guilty)}):
        counts, lines, rejects, out = run(tmp_path, segs, params(demo_models), models=models)
    assert [(r["id"], r["reason"]) for r in rejects] == [(guilty["id"], "model_error")]
    assert "synthetic failure" in rejects[0]["detail"]
    assert sorted(x["id"] for x in lines) == sorted(s["id"] for s in segs if s is not guilty)
    assert "retrying one at a time" in caplog.text and counts["ok"] == 5


@pytest.mark.parametrize(
    "failing,rule,what",
    [
        ("all", {"first_errors": 3, "max_error_share": 0.5}, "the first 3 segments all failed"),
        ("most", {"first_errors": 100, "max_error_share": 0.5}, "4 of 6 segments failed"),
    ],
)
def test_systematic_model_failure_fails_the_job(tmp_path, demo_models, models, failing, rule, what):
    from speechprep.core.failures import SystematicFailure

    segs = segments(6)
    lengths = None if failing == "all" else {_samples(s) for s in segs[:4]}
    with _FailOn(models, lengths), pytest.raises(SystematicFailure) as e:
        run(tmp_path, segs, params(demo_models, model_failure=rule), models=models)
    msg = str(e.value)
    assert f"the model {demo_models[1]['hubert']}" in msg and what in msg
    assert "First error: " in msg and "RuntimeError: synthetic failure on" in msg and "\n" not in msg
    assert (tmp_path / ".partial" / "o.jsonl").exists()  # the resume file is kept
    assert not (tmp_path / "o.units.jsonl").exists()


def test_cli_exits_with_the_failure_code_on_a_systematic_failure(tmp_path, demo_models):
    import joblib

    from speechprep.core.failures import EXIT_CODE

    km, _ = _fitted_kmeans()  # 12-dim centres: a k-means for another model than this 64-dim HuBERT
    joblib.dump(km, tmp_path / "other_km.bin")
    p_json = {
        **asdict(
            params(
                demo_models,
                kmeans=str(tmp_path / "other_km.bin"),
                hash_cache=str(tmp_path / "c"),
                model_failure={"first_errors": 2, "max_error_share": 0.5},
            )
        )
    }
    write_jsonl(tmp_path / "o.segments.jsonl", segments(4))
    p = subprocess.run(
        [
            sys.executable,
            "-m",
            "speechprep",
            "s2s",
            "run",
            "--segments",
            str(tmp_path / "o.segments.jsonl"),
            "--params",
            json.dumps(p_json),
            "--resume",
            str(tmp_path / ".partial" / "o.jsonl"),
            "--out",
            str(tmp_path / "o.units.jsonl"),
            "--wav-dir",
            str(tmp_path / "o"),
            "--rejects",
            str(tmp_path / "o.rej.jsonl"),
        ],
        capture_output=True,
        text=True,
        encoding="utf-8",
    )
    assert p.returncode == EXIT_CODE, p.stderr[-3000:]
    assert "Traceback" not in p.stderr
    last = p.stderr.strip().splitlines()[-1]
    assert last.startswith("error: s2s: the model ") and "fails systematically: the first 2 segments all failed" in last
    assert (tmp_path / ".partial" / "o.jsonl").exists() and not (tmp_path / "o.units.jsonl").exists()


def test_long_utf8_ids_get_safe_file_names(tmp_path, demo_models, models):
    from speechprep.core.names import file_stem

    segs = segments(3)
    long_id = "é" * 160 + "_0000"
    assert len(long_id.encode("utf-8")) > 300
    segs.append({**segs[0], "id": long_id})
    counts, lines, rejects, out = run(tmp_path, segs, params(demo_models), models=models)
    assert counts["ok"] == 4 and not rejects
    line = next(x for x in lines if x["id"] == long_id)
    wav = Path(line["wav"])
    assert wav.name == f"{file_stem(long_id)}.wav" and len(wav.name.encode("utf-8")) <= 255 and wav.exists()
    assert line["units"] == next(x for x in lines if x["id"] == segs[0]["id"])["units"]


def test_atomic_open_takes_a_target_name_near_the_limit(tmp_path):
    from speechprep.io.jsonio import atomic_open

    target = tmp_path / ("é" * 123 + ".wav")  # 250 bytes
    assert len(target.name.encode("utf-8")) == 250
    with atomic_open(target, "wb") as f:
        f.write(b"data")
    assert target.read_bytes() == b"data" and [p.name for p in tmp_path.iterdir()] == [target.name]


def test_model_hashes_come_from_the_cache(tmp_path, demo_models, models):
    from speechprep.io.modelfiles import sha256_file

    cache = tmp_path / "cache"
    p = params(demo_models, hash_cache=str(cache), model_failure={"first_errors": 5, "max_error_share": 0.2})
    assert p.model_failure == {"first_errors": 5, "max_error_share": 0.2}
    _, lines, _, _ = run(tmp_path, segments(2), p, models=models)
    assert len(list(cache.glob("*.json"))) == 4
    for key in ("hubert", "kmeans", "vocoder", "vocoder_config"):
        assert lines[0][f"{key}_sha256"] == sha256_file(demo_models[1][key])


def test_the_stage_through_onnx_runtime_gives_the_same_units(tmp_path, demo_models, models):
    """s2s.runtime onnxruntime: the checked export of the demo HuBERT, the same units and WAVs."""
    pytest.importorskip("onnxruntime")
    from speechprep.s2s import runtime as s2s_runtime

    export = tmp_path / "hubert.onnx"
    s2s_runtime.build_export(demo_models[1]["hubert"], 2, export)
    segs = segments(8)
    _, eager, _, out_e = run(tmp_path, segs, params(demo_models), tag="eager", models=models)
    p = params(demo_models, runtime="onnxruntime")
    ort = s2s.Models(p, "cpu", str(export))
    assert ort.runtime == "onnxruntime" and ort.encoder is not None
    _, fast, _, out_f = run(tmp_path, segs, p, tag="ort", models=ort)
    assert [(x["id"], x["units"]) for x in fast] == [(x["id"], x["units"]) for x in eager]
    for x in eager:
        name = Path(x["wav"]).name
        assert (out_f["wavs"] / name).read_bytes() == (out_e["wavs"] / name).read_bytes()
    with pytest.raises(UsageError, match="no export of the HuBERT was given"):
        s2s.Models(p, "cpu")
