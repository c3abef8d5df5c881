#!/usr/bin/env python3
"""What each model stage costs on one GPU at real size, in one short run: the device check.

    bash scripts/device_check.sh carry          # here: the wheels and real speech it carries
    bash scripts/device_check.sh [--quick] [options of ``run``]

On a machine where torch sees CUDA it runs on the GPU; elsewhere it runs the same steps on
the CPU at smaller sizes and says so (``--quick``: a tiny TitaNet only, for the unit test).
Steps, each printed as it ends:

1. build: the real-size models from code (``python -m speechprep models build-real-size``:
   random weights at each real architecture and size), timed;
2. per model, in a fresh worker process, loaded through the pipeline's own code (the
   ``asr``, ``s2s`` and ``speakers`` jobs' loaders, as bench/workflow/real_size.py does):
   * the fixed part: the worker's start, its imports, the restore onto the device and a
     warm-up batch of 2 s (CUDA synchronised);
   * memory per batch-second: batches of growing padded seconds of 10 s pieces of real
     speech, each measured by the job's own probe (:class:`speechprep.core.memprobe.Probe`:
     on CUDA ``max_memory_allocated`` above what was allocated before the batch, on the CPU
     the peak resident memory), and the least-squares slope (MB per padded second);
   * throughput: real speech (``--seconds``, the clips repeated) through the job's batching
     (:class:`speechprep.core.batching.BatchRunner`, its first batch a probe, the budget
     from the stage's ``batch`` block: :func:`~speechprep.core.batching.seconds_budget`),
     as RTFx = audio seconds / wall seconds;
   * OOM halving: one batch that cannot fit under a memory cap of about ``FIT_S`` padded
     seconds above what the model holds (on CUDA ``torch.cuda.set_per_process_memory_fraction``,
     a real CUDA out-of-memory error from the allocator; on the CPU the job's own guard,
     :class:`speechprep.core.memprobe.guard`), then one item too long to fit alone: the
     runner's log lines (halvings, the lowered budget) and every item's outcome;
3. feed rate: the job's audio reading (:func:`speechprep.io.audio.read_segment`, what a model
   stage's ``prepare`` calls) over segments of real recordings in four codecs, as audio
   seconds per CPU second of one process, then with one process per core; and the cores a
   GPU needs at each stage's RTFx.

``--json FILE`` keeps every figure. The lent machine has its own Python (CUDA PyTorch) and
reaches no registry: ``carry`` builds ``.device_check/`` here (the wheels of what the jobs
import that its image lacks, for CPython 3.12, and the real speech), which travels with the
run. docs/device_check.md: how to run it, what each figure means, and the CPU figures.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(Path(__file__).resolve().parent))
import real_size  # noqa: E402  (the real-size bench beside this file: its model table and helpers)

CARRY = REPO / ".device_check"
SR = 16000
# name: (kind, environment, config section of its batch block)
MODELS = {
    name: (spec[0], spec[1], {"asr": "asr", "s2s": "s2s", "speaker": "diarize"}[spec[0]])
    for name, spec in real_size.MODELS.items()
}
MODELS["titanet-tiny"] = ("speaker", "asr", "diarize")  # speechprep.models.speaker_nemo's test model
# sizes by mode: audio for the throughput, the probe's batches, the OOM check's items
SIZES = {
    "cuda": {"seconds": 3600.0, "probe": (60.0, 240.0, 960.0), "item_s": 20.0, "items": 64, "fit_s": 100.0},
    "cpu": {"seconds": 30.0, "probe": (10.0, 20.0, 40.0), "item_s": 10.0, "items": 6, "fit_s": 10.0},
    "quick": {"seconds": 8.0, "probe": (2.0, 4.0, 8.0), "item_s": 8.0, "items": 8, "fit_s": 3.0},
}
WARMUP_S = 2.0

# ---------------------------------------------------------------------------
# what travels: the wheels the lent machine's image lacks, for its CPython 3.12
# ---------------------------------------------------------------------------
# binary wheels from the registry (the versions of .venvs/asr and .venvs/s2s)
WHEELS = """
nemo-toolkit==3.0.0 lhotse==1.33.0 librosa==0.11.0 hydra-core==1.3.2 omegaconf==2.3.0 datasets==5.2.0
soundfile==0.14.0 soxr==1.1.0 cffi==2.1.1 pycparser==3.12 bitarray==3.12.3 kaldialign==0.12.0 cytoolz==1.2.0
pydantic==2.14.4 pydantic_core==2.50.5 annotated-types==0.8.0 typing-inspection==0.4.5 dill==0.4.1
multiprocess==0.70.19 webdataset==1.0.2 braceexpand==0.1.7 StrEnum==0.4.15 toml==0.10.2 overrides==7.7.0
truststore==0.10.5 sniffio==1.3.1 httpx2==2.17.0 httpcore2==2.17.0 googleapis-common-protos==1.76.0
nv-one-logger-core==2.3.1 nv-one-logger-training-telemetry==2.3.1
nv-one-logger-pytorch-lightning-integration==2.3.1
audioread==3.1.0 decorator==5.3.2 pooch==1.9.0 platformdirs==4.14.9 smart_open==9.0.4 text-unidecode==1.3 aistore==2.0.0
msgspec==0.23.0 tenacity==9.2.1
""".split()  # noqa: SIM905
# source distributions, built here into pure-Python wheels (fairseq-fixed without its C++ parts,
# as envs/s2s.yaml installs it; built by the s2s environment, which has torch and Cython)
SDISTS = ["fairseq-fixed==0.12.3.1", "antlr4-python3-runtime==4.9.3", "intervaltree==3.2.1"]
PLATFORMS = [
    *(f"manylinux_2_{n}_x86_64" for n in (5, 17, 24, 27, 28, 31, 34)),
    "manylinux2014_x86_64",
    "manylinux1_x86_64",
]
# the lent machine's own Python packages (its image's list, docs/device_check.md): not carried
IMAGE = set(
    """absl-py accelerate aiofiles aiohappyeyeballs aiohttp aiosignal annotated-doc anyio attrs botorch build certifi
    charset-normalizer chex click cloudpickle cmake colorama contourpy coverage cuda-bindings cuda-core cuda-pathfinder
    cuda-toolkit cupy-cuda13x cycler cython diffrax e3nn einops equinox etils execnet filelock flatbuffers flax
    fonttools formulaic frozenlist fsspec gpytorch grpcio h11 h5py hf-xet httpcore httpx huggingface-hub humanize
    hypothesis idna imageio iniconfig interface-meta jax jaxlib jaxtyping jinja2 joblib kiwisolver lazy-loader lightning
    lightning-utilities linear-operator lineax llvmlite lxml markdown markdown-it-py markupsafe matplotlib mdurl meson
    ml-dtypes mpi4py mpmath msgpack multidict multipledispatch mypy-extensions nanobind narwhals networkx ninja numba
    numba-cuda numpy numpyro nvidia-ml-py onnx onnx-ir onnxruntime onnxscript opencv-python-headless optax opt-einsum
    opt-einsum-fx optimistix orbax-checkpoint packaging pandas pathspec patsy peft pillow pip pluggy portalocker
    prometheus-client propcache protobuf psutil pyarrow pybind11 py-cpuinfo pygments pyparsing pyproject-hooks
    pyre-extensions pytest pytest-benchmark pytest-cov pytest-mock pytest-timeout pytest-xdist python-dateutil
    pytorch-lightning pyyaml regex requests rich sacrebleu safetensors scikit-build-core scikit-image scikit-learn scipy
    seaborn sentencepiece sentence-transformers setuptools shellingham simplejson six sortedcontainers statsmodels sympy
    tabulate tensorboard tensorboard-data-server tensorstore threadpoolctl tifffile tiktoken timm tokenizers toolz torch
    torchaudio torchdiffeq torch-geometric torchmetrics torchvision tqdm transformers treescope triton typer
    typing-extensions typing-inspect urllib3 uvloop wadler-lindig werkzeug wheel wrapt xarray xxhash yarl
    zipp""".split()  # noqa: SIM905
)
# real speech it carries (tests/real_speech.py's layout, so its readers find them): package -> paths in it
SPEECH = {
    "pocketsphinx-testdata": [f"{'usr/share/pocketsphinx/test/data'}/{d}" for d in ("librivox", "cards")],
    "alsa-utils": ["usr/share/sounds/alsa"],
    "hyperrogue-music": ["usr/share/hyperrogue/music/hr-domina-hunting.ogg"],
    "asc-music": ["usr/share/games/asc/music/machine_wars.mp3"],
}
CARRY_LIMIT_MB = 56.0  # of the device tool's 64 MiB, the rest for the working tree


def norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def requires(wheel: Path) -> list[str]:
    """A wheel's own requirements (``Requires-Dist`` without extras, markers for CPython 3.12 on Linux)."""
    from packaging.requirements import Requirement

    env = {"python_version": "3.12", "python_full_version": "3.12.3", "sys_platform": "linux", "extra": ""}
    env.update(platform_system="Linux", platform_machine="x86_64", implementation_name="cpython", os_name="posix")
    with zipfile.ZipFile(wheel) as z:
        meta = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
        lines = z.read(meta).decode("utf-8").splitlines()
    out = []
    for line in lines:
        if line.startswith("Requires-Dist:"):
            r = Requirement(line.split(":", 1)[1].strip())
            if r.marker is None or r.marker.evaluate(env):
                out.append(norm(r.name))
    return out


def build_carry(s2s_python: str) -> int:
    """``.device_check/``: the wheels (:data:`WHEELS` downloaded for CPython 3.12, :data:`SDISTS`
    built here) and the real speech (:data:`SPEECH`); then what no carried wheel and no package of
    the image provides, and the size."""
    wheels = CARRY / "wheels"
    shutil.rmtree(CARRY, ignore_errors=True)
    wheels.mkdir(parents=True)
    plat = [a for p in PLATFORMS for a in ("--platform", p)]
    pip = [sys.executable, "-m", "pip", "-q", "download", "--no-deps", "--only-binary=:all:"]
    pip += ["--python-version", "3.12", "--implementation", "cp", *plat, "-d", str(wheels)]
    subprocess.run([*pip, *WHEELS], check=True)
    env = dict(os.environ, READTHEDOCS="1")  # fairseq: no C++ extensions (envs/s2s.yaml)
    subprocess.run(
        [s2s_python, "-m", "pip", "-q", "wheel", "--no-deps", "--no-build-isolation", "-w", str(wheels), *SDISTS],
        check=True,
        env=env,
    )
    for w in wheels.glob("*.whl"):
        tags = w.name[:-4].split("-")[-3:]
        if tags[0].startswith("cp3") and tags[0] != "cp312" and tags[1] != "abi3":
            sys.exit(f"{w.name} was built for {tags[0]}, not the lent machine's CPython 3.12")
    sys.path.insert(0, str(REPO / "tests"))
    import real_speech

    for package, paths in SPEECH.items():
        src = real_speech.fetch(package)
        for rel in paths:
            dest = CARRY / "real_speech" / package / rel
            dest.parent.mkdir(parents=True, exist_ok=True)
            (shutil.copytree if (src / rel).is_dir() else shutil.copy2)(src / rel, dest)
        shutil.copy2(src / ".complete", CARRY / "real_speech" / package / ".complete")
    have = IMAGE | {norm(w.name.split("-")[0]) for w in wheels.glob("*.whl")}
    missing = {}
    for w in sorted(wheels.glob("*.whl")):
        for r in requires(w):
            if r not in have:
                missing.setdefault(r, []).append(w.name.split("-")[0])
    size = sum(f.stat().st_size for f in CARRY.rglob("*") if f.is_file()) / 2**20
    print(f"{CARRY.relative_to(REPO)}: {len(list(wheels.glob('*.whl')))} wheels, {size:.1f} MiB in all")
    for r, by in sorted(missing.items()):  # required, neither carried nor on the image: none imported by the jobs
        print(f"  not carried, not on the image: {r} (required by {', '.join(by)})")
    if size > CARRY_LIMIT_MB:
        print(f"over {CARRY_LIMIT_MB:g} MiB: the device tool carries 64 MiB with the working tree")
        return 1
    return 0


# ---------------------------------------------------------------------------
# the worker: one model on the device
# ---------------------------------------------------------------------------
def speech(seconds: float) -> list:
    """Real speech at 16 kHz, ``seconds`` in all: the LibriVox reader, the playing-card speaker and
    the ALSA voice (tests/real_speech.py), each clip as it is, then joined into ~12 s segments
    (0.3 s apart) and repeated until there is enough."""
    import numpy as np

    sys.path.insert(0, str(REPO / "tests"))
    import real_speech

    clips = [
        real_speech.read(u.path, SR)[0]
        for f in (real_speech.librivox, real_speech.cards, real_speech.alsa_voice)
        for u in f()
    ]
    clips = [np.ascontiguousarray(c, dtype=np.float32) for c in clips]
    out, piece, total, i = list(clips), [], sum(map(len, clips)), 0
    gap = np.zeros(int(0.3 * SR), np.float32)
    while total < seconds * SR:
        piece += [clips[i % len(clips)], gap]
        i += 1
        if sum(map(len, piece)) >= 12 * SR:
            out.append(np.concatenate(piece))
            total += len(out[-1])
            piece = []
    kept, n = [], 0
    for c in out:
        if n >= seconds * SR:
            break
        kept.append(c)
        n += len(c)
    return kept


def pieces(clips: list, seconds: float, count: int) -> list:
    """``count`` pieces of ``seconds`` each, cut from the speech joined end to end (repeated as needed)."""
    import numpy as np

    audio = np.concatenate(clips)
    n = int(seconds * SR)
    while len(audio) < n * count:
        audio = np.concatenate([audio, audio])
    return [audio[i * n : (i + 1) * n] for i in range(count)]


def load(name: str, path: Path, device: str, threads: int) -> tuple:
    """Import what the stage's job imports and restore its model through the pipeline's code:
    ``(model, {fixed part}, run on a batch -> one result per item)``."""
    kind = MODELS[name][0]
    t = time.perf_counter()
    import torch

    torch.set_num_threads(threads)
    if kind == "asr":
        import nemo.collections.asr  # the restore imports it: timed here, with the imports

        from speechprep.asr.model import load_model
        from speechprep.asr.words import NemoTranscriber
    elif kind == "s2s":
        import fairseq.models
        import fairseq.tasks  # noqa: F401

        from speechprep.s2s import fairseq_legacy
        from speechprep.s2s.models import dense_features
    else:
        import nemo.collections.asr  # noqa: F401

        from speechprep.encoders import make_encoder
    sync = torch.cuda.synchronize if device.startswith("cuda") else (lambda: None)
    fixed = {"import_s": time.perf_counter() - t}
    t = time.perf_counter()
    if kind == "asr":
        model = load_model(str(path), device)
        transcriber = NemoTranscriber(model, timestamps=False)
        infer = lambda b: list(transcriber(b, "en"))
    elif kind == "s2s":
        model, _, task, _ = fairseq_legacy.load(path)
        model.to(device)  # as the s2s stage's Models does
        norm_ = bool(task.cfg.normalize)
        layer = real_size.S2S_LAYER.get(name, 6)
        infer = lambda b: dense_features(model, b, layer, norm_)
    else:
        model = make_encoder(str(path), device, threads)
        infer = lambda b: list(model(b))
    sync()
    fixed["restore_s"] = time.perf_counter() - t

    def run(batch):
        out = infer(batch)
        sync()
        return out

    return model, fixed, run


def probe_memory(run, device: str, clips: list, sizes: tuple) -> list:
    """``[(padded s, MB)]``: each batch of 10 s pieces (shorter where the sizes are) measured by the
    job's probe (:class:`~speechprep.core.memprobe.Probe`), in growing order."""
    from speechprep.core.memprobe import Probe, job_limit_mb

    piece_s = min(10.0, min(sizes))
    out = []
    for seconds in sizes:
        batch = pieces(clips, piece_s, int(round(seconds / piece_s)))
        p = Probe(device, job_limit_mb()[0], ceiling=1e9, source="device_check")
        p.start()
        run(batch)
        p.size(seconds, seconds)
        out.append((seconds, p.result["probe_mb"]))
    return out


def throughput(run, device: str, section: str, clips: list) -> dict:
    """The clips through the job's batching (first batch a probe): RTFx and how it batched."""
    import yaml

    from speechprep.core.batching import BatchRunner, seconds_budget
    from speechprep.core.config import BatchBudget
    from speechprep.core.memprobe import Probe, job_limit_mb

    with open(REPO / "config" / "config.yaml", encoding="utf-8") as f:
        block = BatchBudget(**yaml.safe_load(f)[section]["batch"])
    budget = seconds_budget(device, block)
    limit, source = job_limit_mb()
    probe = Probe(device, limit, block.max_seconds, block.gpu_reserve_gib * 1024, None, source)
    lines, batches = [], []
    runner = BatchRunner(budget, lambda c: len(c) / SR, run, logger=lines.append, probe=probe)
    runner.on_batch_start = lambda b: batches.append(runner.padded(b))
    t = time.perf_counter()
    done = sum(1 for o in runner.run(clips) if not o.oom)
    wall = time.perf_counter() - t
    audio = sum(map(len, clips)) / SR
    return {
        "audio_s": audio,
        "wall_s": wall,
        "rtfx": audio / wall,
        "segments": len(clips),
        "done": done,
        "first_budget_s": budget,
        "batches": len(batches),
        "mean_batch_s": sum(batches) / len(batches),
        "probe": probe.result,
        "log": lines,
    }


def oom_check(run, device: str, clips: list, mb_per_s: float, sizes: dict) -> dict:
    """One batch of ``items`` x ``item_s`` that cannot fit under a cap of ``fit_s`` padded seconds
    (at ``mb_per_s``) above what the model holds, then one item of 4 x ``fit_s``, through the job's
    runner (module docstring); its log lines, OOMs and each item's outcome."""
    import torch

    from speechprep.core.batching import BatchRunner, free_device_cache
    from speechprep.core.memprobe import _status, guard, rss_mb, trim

    items = pieces(clips, sizes["item_s"], sizes["items"])
    long_item = pieces(clips, 4 * sizes["fit_s"], 1)
    headroom = max(mb_per_s, 0.05) * sizes["fit_s"]
    lines: list[str] = []
    runner = BatchRunner(len(items) * sizes["item_s"], lambda c: len(c) / SR, run, logger=lines.append)
    out = {"headroom_mb": headroom, "batch_s": len(items) * sizes["item_s"], "long_item_s": 4 * sizes["fit_s"]}
    if device.startswith("cuda"):
        dev = torch.device(device)
        free_device_cache()
        total = torch.cuda.get_device_properties(dev).total_memory
        cap = torch.cuda.memory_allocated(dev) + headroom * 2**20
        torch.cuda.set_per_process_memory_fraction(min(1.0, cap / total), dev)
        out["cap"] = f"torch.cuda.set_per_process_memory_fraction: {cap / 2**20:.0f} MB of {total / 2**20:.0f}"
        try:
            first = list(runner.run(items))
            second = list(runner.run([long_item[0]]))
        finally:
            torch.cuda.set_per_process_memory_fraction(1.0, dev)
            free_device_cache()
    else:
        limit = rss_mb() + headroom
        out["cap"] = f"speechprep.core.memprobe.guard: {limit:.0f} MB resident (RLIMIT_DATA)"
        trim()  # as the guard's rearm does: private memory mapped but not resident can be reused unrefused
        out["private_not_resident_mb"] = _status().get("VmData", 0) / 1024 - rss_mb()
        with guard(limit) as g:
            runner.relief, runner.on_oom = g.lift, g.refused
            runner.on_batch_start = lambda b: g.rearm()
            first = list(runner.run(items))
            second = list(runner.run([long_item[0]]))
        out["guard_lifted"] = g.lifted
    out.update(
        ooms=runner.ooms,
        batch_done=sum(not o.oom for o in first),
        batch_items=len(first),
        batch_rejected_oom=sum(o.oom for o in first),
        long_item="rejected oom" if second[0].oom else "done",
        budget_after_s=runner.budget,
        log=lines,
    )
    return out


def worker(name: str, path: Path, device: str, threads: int, mode: str, t_start: float) -> dict:
    """One model: the fixed part, the memory probe, the throughput, the OOM check (module docstring)."""
    sizes = SIZES[mode]
    start_s = time.time() - t_start  # the interpreter's start, before this function
    model, fixed, run = load(name, path, device, threads)
    fixed["start_s"] = start_s
    clips = speech(sizes["seconds"])
    t = time.perf_counter()
    run([clips[0][: int(WARMUP_S * SR)]])
    fixed["warmup_s"] = time.perf_counter() - t
    out = {"model": name, "device": device, "threads": threads, "fixed": fixed}
    out["parameters"] = sum(p.numel() for p in getattr(model, "model", model).parameters())
    out["probe"] = probe_memory(run, device, clips, sizes["probe"])
    per_s = real_size.per_batch_second(out["probe"])
    out["mb_per_batch_s"] = per_s
    out["throughput"] = throughput(run, device, MODELS[name][2], clips)
    if device.startswith("cuda"):  # over the throughput pass (its probe reset the peak)
        import torch

        out["peak_gpu_mb"] = torch.cuda.max_memory_allocated() / 2**20
    slope = per_s["slope_mb_per_s"]
    out["oom"] = oom_check(run, device, clips, slope if slope and slope > 0 else per_s["largest_mb_per_s"], sizes)
    return out


# ---------------------------------------------------------------------------
# the feed rate: the job's audio reading, per core
# ---------------------------------------------------------------------------
def feed_segments(seg_s: float = 10.0) -> list[dict]:
    """Manifest lines over real recordings, four codecs: whole clips of 16 kHz wav (LibriVox, cards)
    and 48 kHz wav (ALSA voice), and ``seg_s`` windows through an ogg Vorbis and an mp3 track."""
    import soundfile as sf

    sys.path.insert(0, str(REPO / "tests"))
    import real_speech

    segs = []
    for codec, utts in (
        ("wav 16 kHz", real_speech.librivox() + real_speech.cards()),
        ("wav 48 kHz", real_speech.alsa_voice()),
    ):
        for u in utts:
            segs.append(
                {
                    "audio_filepath": str(u.path),
                    "offset": 0.0,
                    "duration": sf.info(str(u.path)).duration,
                    "codec": codec,
                }
            )
    for codec, pack in (("ogg vorbis 44.1/48 kHz", "hyperrogue"), ("mp3", "asc")):
        track = real_speech.music(pack)[0]
        length = sf.info(str(track)).duration
        for k in range(min(12, int(length // seg_s))):
            segs.append({"audio_filepath": str(track), "offset": k * seg_s, "duration": seg_s, "codec": codec})
    return segs


def read_all(segs: list[dict]) -> dict:
    """Every segment through :func:`speechprep.io.audio.read_segment` (16 kHz): audio s, CPU s and wall s by codec."""
    from speechprep.io.audio import read_segment

    out: dict[str, list[float]] = {}
    for s in segs:
        c, w = time.process_time(), time.perf_counter()
        x = read_segment(s, SR)
        acc = out.setdefault(s["codec"], [0.0, 0.0, 0.0])
        acc[0] += len(x) / SR
        acc[1] += time.process_time() - c
        acc[2] += time.perf_counter() - w
    return out


def feed(processes: int, repeat: int) -> dict:
    """The feed rate of one process (each codec, and all) and of ``processes`` at once."""
    from concurrent.futures import ProcessPoolExecutor

    segs = feed_segments()
    read_all(segs[:2])  # imports and codec libraries loaded
    one = read_all(segs * repeat)
    audio, cpu = sum(v[0] for v in one.values()), sum(v[1] for v in one.values())
    out = {"per_codec": {k: {"audio_s": v[0], "cpu_s": v[1], "rate": v[0] / v[1]} for k, v in one.items()}}
    out["per_core"] = audio / cpu
    t = time.perf_counter()
    with ProcessPoolExecutor(processes) as pool:
        parts = list(pool.map(read_all, [segs * repeat] * processes))
    wall = time.perf_counter() - t
    out["processes"] = processes
    out["all_cores"] = sum(v[0] for p in parts for v in p.values()) / wall
    return out


# ---------------------------------------------------------------------------
# the parent: build, run each worker, report
# ---------------------------------------------------------------------------
def python_for(env: str) -> str:
    """The stage environment's interpreter where this checkout has it (``.venvs/<env>``), else this one
    (the lent machine: one Python with everything carried)."""
    p = REPO / ".venvs" / env / "bin" / "python"
    return str(p) if p.is_file() else sys.executable


def sub(cmd: list[str], what: str, timeout: float | None = None) -> str:
    env = dict(
        os.environ,
        PYTHONWARNINGS="ignore",
        PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
    )
    try:
        p = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as e:
        raise RuntimeError(f"{what} ran past {timeout:.0f} s and was stopped") from e
    if p.returncode:
        raise RuntimeError(f"{what} failed ({p.returncode}):\n{p.stderr[-3000:]}")
    return p.stdout


def build(names: list[str], out: Path) -> dict:
    """The models built from code into ``out`` (each once), timed; one library at a time (NeMo's,
    fairseq's), so that one whose imports fail (on the lent machine: a carried wheel that does
    not fit its packages) costs only its own models: ``failed`` says why."""
    t, files, failed = time.perf_counter(), {}, {}
    paths = real_size.real_size_files()
    from speechprep.models.real_size import MODELS as BUILT

    for library in ("nemo", "fairseq"):
        some = [n for n in names if n in BUILT and BUILT[n][0] == library]
        if not some:
            continue
        cmd = [python_for(BUILT[some[0]][1]), "-m", "speechprep", "models", "build-real-size", "--out", str(out)]
        try:
            sub([*cmd, "--only", *some], f"build-real-size ({library})")
            files.update({n: out / paths[n] for n in some})
        except RuntimeError as e:
            failed.update(dict.fromkeys(some, str(e)))
    if "titanet-tiny" in names:
        path = out / "titanet-tiny.nemo"
        code = "import sys, pathlib; from speechprep.models import speaker_nemo as s; "
        code += "s.build_one('titanet', pathlib.Path(sys.argv[1]))"
        try:
            if not path.is_file():
                sub([python_for("asr"), "-c", code, str(path)], "build titanet-tiny")
            files["titanet-tiny"] = path
        except RuntimeError as e:
            failed["titanet-tiny"] = str(e)
    return {"wall_s": time.perf_counter() - t, "files": {n: str(p) for n, p in files.items()}, "failed": failed}


def machine(device: str) -> str:
    with open("/proc/cpuinfo", encoding="utf-8") as f:
        cpu = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), "?")
    text = f"{cpu}, {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}"
    if device.startswith("cuda"):
        code = (
            "import torch; p = torch.cuda.get_device_properties(0); print(f'{p.name}, "
            "{p.total_memory / 2**30:.0f} GiB, torch {torch.__version__}, CUDA {torch.version.cuda}')"
        )
        text += "; " + sub([sys.executable, "-c", code], "the GPU's name").strip()
    return text


def report(r: dict) -> None:
    f, t, m, o = r["fixed"], r["throughput"], r["mb_per_batch_s"], r["oom"]
    slope = "-" if m["slope_mb_per_s"] is None else f"{m['slope_mb_per_s']:.2f}"
    print(
        f"  parameters {r['parameters'] / 1e6:.1f} M; fixed part: start {f['start_s']:.1f} s + "
        f"imports {f['import_s']:.1f} s + "
        f"restore {f['restore_s']:.1f} s + warm-up {f['warmup_s']:.2f} s = {r['fixed_s']:.1f} s"
    )
    print(
        f"  memory per batch-second: {slope} MB/s (slope over {', '.join(f'{s:g}' for s, _ in r['probe'])} padded s: "
        f"{', '.join(f'{mb:.0f}' for _, mb in r['probe'])} MB); largest batch {m['largest_mb_per_s']:.2f} MB/s"
        + (f"; peak GPU memory of the throughput pass {r['peak_gpu_mb']:.0f} MB" if "peak_gpu_mb" in r else "")
    )
    pr = t["probe"] or {}
    print(
        f"  throughput: RTFx {t['rtfx']:.1f} ({t['audio_s']:.0f} s of audio in {t['wall_s']:.2f} s, "
        f"{t['segments']} segments, {t['batches']} batches of {t['mean_batch_s']:.0f} padded s on average; "
        f"first budget {t['first_budget_s']:.0f} s, "
        f"the probe chose {pr.get('seconds_chosen', '-')} s at {pr.get('mb_per_second', '-')} MB/s)"
    )
    print(
        f"  OOM halving under {o['cap']}: a batch of {o['batch_items']} ({o['batch_s']:g} padded s): {o['ooms']} OOMs, "
        f"{o['batch_done']} of {o['batch_items']} done, {o['batch_rejected_oom']} rejected oom; budget after "
        f"{o['budget_after_s']:.1f} s; one item of {o['long_item_s']:g} s: {o['long_item']}"
    )
    if "private_not_resident_mb" in o:
        print(f"    (private memory mapped but not resident at the start: {o['private_not_resident_mb']:.0f} MB)")
    for line in o["log"]:
        print(f"    | {line}")


def arguments() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("command", nargs="?", default="run", choices=["run", "carry"])
    ap.add_argument("--device", default="auto", help="auto (CUDA when torch sees it) | cuda | cpu")
    ap.add_argument("--quick", action="store_true", help="a tiny TitaNet only, CPU sizes cut down (the unit test)")
    ap.add_argument("--models", help=f"comma-separated, of {', '.join(MODELS)} (default: every real-size one)")
    ap.add_argument("--threads", type=int, default=2, help="torch threads of each model worker")
    ap.add_argument(
        "--dir", default=str(Path.home() / ".cache/speechprep/real_size"), help="where the models are built"
    )
    ap.add_argument("--json", help="write every figure here")
    ap.add_argument("--budget-s", type=float, help="no model worker starts after this (s; 420 on CUDA, 1800 on CPU)")
    ap.add_argument("--s2s-python", default=str(REPO / ".venvs/s2s/bin/python"), help="carry: builds the sdists")
    return ap.parse_args()


def run_models(names, built, device, mode, a, t_all, failed) -> list[dict]:
    """Each built model in its own worker, within --budget-s: its figures, printed."""
    out = []
    for name in [n for n in names if n in built["files"]]:
        left = a.budget_s - (time.perf_counter() - t_all)
        if left < 60:  # the feed rate and the report still to come
            print(f"{name}: SKIPPED: {a.budget_s:.0f} s of --budget-s spent", flush=True)
            failed.append(name)
            continue
        cmd = [
            python_for(MODELS[name][1]),
            __file__,
            "--worker",
            name,
            built["files"][name],
            device,
            str(a.threads),
            mode,
        ]
        try:
            r = json.loads(sub([*cmd, repr(time.time())], f"{name} worker", left - 45).strip().splitlines()[-1])
        except (RuntimeError, ValueError) as e:
            print(f"{name}: FAILED: {e}", flush=True)
            failed.append(name)
            continue
        f = r["fixed"]
        r["fixed_s"] = f["start_s"] + f["import_s"] + f["restore_s"] + f["warmup_s"]
        r["fixed_share_of_1h_shard"] = r["fixed_s"] / (r["fixed_s"] + 3600 / r["throughput"]["rtfx"])
        print(f"{name} on {device}:", flush=True)
        report(r)
        out.append(r)
    return out


def feed_and_table(models: list[dict], quick: bool) -> dict:
    """The audio feed rate per core, then a table of every model's figures beside it."""
    processes = os.cpu_count() or 1
    fr = json.loads(
        sub([python_for("asr"), __file__, "--feed", str(processes), "1" if quick else "3"], "feed rate")
        .strip()
        .splitlines()[-1]
    )
    codecs = "; ".join(f"{k} {v['rate']:.0f}" for k, v in fr["per_codec"].items())
    print(
        f"feed rate (the job's read_segment, audio s per CPU s): {fr['per_core']:.0f} per core ({codecs}); "
        f"{fr['all_cores']:.0f} audio s per s with {fr['processes']} processes"
    )
    print(
        "\n| model | RTFx | fixed part s | fixed part of a 1-h shard | MB / batch-s | cores to feed it |"
        " job RTFx, reading in line |"
    )
    print("|---|---|---|---|---|---|---|")
    for r in models:
        rtfx, slope = r["throughput"]["rtfx"], r["mb_per_batch_s"]["slope_mb_per_s"]
        inline = 1 / (1 / rtfx + 1 / fr["per_core"])  # the job reads each batch's audio, then infers, in one thread
        r["cores_to_feed"], r["job_rtfx_inline"] = rtfx / fr["per_core"], inline
        print(
            f"| {r['model']} | {rtfx:.1f} | {r['fixed_s']:.1f} | {100 * r['fixed_share_of_1h_shard']:.2f} % | "
            f"{'-' if slope is None else f'{slope:.2f}'} | {r['cores_to_feed']:.2f} | {inline:.1f} |"
        )
    return fr


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        name, path, device, threads, mode, t0 = sys.argv[2:8]
        print(json.dumps(worker(name, Path(path), device, int(threads), mode, float(t0))))
        return
    if len(sys.argv) > 1 and sys.argv[1] == "--feed":
        print(json.dumps(feed(int(sys.argv[2]), int(sys.argv[3]))))
        return
    a = arguments()
    if a.command == "carry":
        sys.exit(build_carry(a.s2s_python))
    t_all = time.perf_counter()
    code = "import torch; print('cuda' if torch.cuda.is_available() else 'cpu')"
    device = sub([python_for("asr"), "-c", code], "torch").strip() if a.device == "auto" else a.device
    mode = "quick" if a.quick else ("cuda" if device.startswith("cuda") else "cpu")
    a.budget_s = a.budget_s or (420.0 if device.startswith("cuda") else 1800.0)
    names = a.models.split(",") if a.models else (["titanet-tiny"] if a.quick else list(real_size.MODELS))
    if not device.startswith("cuda"):
        print("NO CUDA DEVICE: the same steps on the CPU, at smaller sizes (figures of this CPU, not a GPU's)")
    print(f"device {device}; {machine(device)}; sizes {mode}: {SIZES[mode]}", flush=True)
    built = build(names, Path(a.dir))
    print(
        f"build: {len(built['files'])} models from code in {built['wall_s']:.1f} s (files kept in {a.dir})", flush=True
    )
    results, failed = {"device": device, "mode": mode, "build": built, "models": []}, []
    for name, why in built["failed"].items():
        print(f"{name}: FAILED to build: {why}", flush=True)
        failed.append(name)
    results["models"] = run_models(names, built, device, mode, a, t_all, failed)
    results["feed"] = feed_and_table(results["models"], a.quick)
    results["wall_s"] = time.perf_counter() - t_all
    print(
        f"\ndevice check on {device} ({mode}): {len(results['models'])} of {len(names)} models, "
        f"{results['wall_s']:.0f} s in all; load average after {os.getloadavg()[0]:.1f}"
        + (f"; FAILED: {', '.join(failed)}" if failed else "")
    )
    if a.json:
        Path(a.json).write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
