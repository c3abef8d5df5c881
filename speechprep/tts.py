"""TTS feature stage: codes, conditioning and emotion vectors, text ids, manifests.

Per shard, two jobs (so a tokenizer change reruns only the text side):

* :func:`run_features` (rule ``tts_features``): for every ASR segment with
  text, its S2S units as int32 ``codes``, a ``condition`` vector (default:
  Resemblyzer's pretrained ``VoiceEncoder``, 256-d) and an ``emo_vec``
  (default: openSMILE eGeMAPSv02 functionals, 88 values), both float32.
  Segments run in batches from :class:`speechprep.batching.BatchRunner`
  (seconds budget from free GPU memory, OOM halves and retries, then rejects
  ``oom``); openSMILE runs in a thread pool while the torch encoder runs.
  Either encoder can be ``torchscript:<path>``: a scripted module taking 16 kHz
  audio and returning one vector per clip.
* :func:`run_text` (rule ``tts_text``): SentencePiece ids (int32) of each
  accepted segment's normalised text.

Then per dataset :func:`build_manifests` (train/val split by a hash of the id,
``stats.json`` with provenance) and across datasets :func:`combine`.

Per-segment artifacts wait in a scratch directory until their shard is done
(Snakemake empties a directory output before rerunning its job); a segment
counts as done only when its checkpoint line exists and its three arrays load.
"""
from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
import json
import os
import re
import shutil
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np

from .audio import AudioError, read_segment
from .checkpoint import Checkpoint, fingerprint
from .failures import FailureRule, ModelFailures
from .jsonio import atomic_open, read_jsonl, reject, write_jsonl
from .models import sha256_cached, sha256_file
from .names import file_stem
from .progress import Progress
from .tts_text import TextNormalizer, load_npy, load_tokenizer, save_npy, text_ids, train_tokenizer

STAGE = "tts"
ALGORITHM_VERSION = "1"
SAMPLE_RATE = 16000
FEATURES = ("codes", "condition", "emo_vec")
# rejects that are the encoders' fault, not the audio's (speechprep.failures)
MODEL_ERRORS = ("encoder_error", "non_finite")
DTYPES = {"text_ids": np.int32, "codes": np.int32, "condition": np.float32, "emo_vec": np.float32}


@dataclass(frozen=True)
class TtsParams:
    condition: str = "resemblyzer"       # or torchscript:<path>
    emotion: str = "egemaps"             # or torchscript:<path>
    device: str = "auto"
    cpu_batch_seconds: float = 120.0     # audio seconds per encoder batch on CPU
    seconds_per_gib: float = 600.0       # on GPU: audio seconds per GiB of free memory
    gpu_reserve_gib: float = 1.0
    max_batch_seconds: float = 3600.0
    min_duration: float = 0.1
    languages: dict = field(default_factory=dict)  # normaliser options per language
    language: str | None = None          # the dataset's language, where segments have none
    model_failure: dict = field(default_factory=lambda: {"first_errors": 10, "max_error_share": 0.5})
    hash_cache: str | None = None        # directory of cached model-file digests

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "TtsParams":
        return cls(**{k: v for k, v in d.items() if k in cls.__dataclass_fields__})


# ---------------------------------------------------------------------------
# encoders: a list of 16 kHz float32 clips -> one float32 vector each
# ---------------------------------------------------------------------------
def _package_file(package: str, *parts: str) -> Path:
    spec = importlib.util.find_spec(package)
    if spec is None or spec.origin is None:
        raise SystemExit(f"package {package!r} is not installed in this environment")
    return Path(spec.origin).parent.joinpath(*parts)


def encoder_file(spec: str) -> Path:
    """The model file behind an encoder spec (its weights, or openSMILE's config)."""
    if spec.startswith("torchscript:"):
        return Path(spec[len("torchscript:"):])
    if spec == "resemblyzer":
        return _package_file("resemblyzer", "pretrained.pt")
    if spec == "egemaps":
        return _package_file("opensmile", "core", "config", "egemaps", "v02", "eGeMAPSv02.conf")
    raise SystemExit(f"unknown encoder {spec!r}: use resemblyzer, egemaps or torchscript:<path>")


def encoder_identity(spec: str, hash_cache: str | None = None) -> dict[str, str]:
    path = encoder_file(spec)
    ident = {"spec": spec, "path": str(path.resolve()), "sha256": sha256_cached(path, hash_cache)}
    if not spec.startswith("torchscript:"):
        package = "resemblyzer" if spec == "resemblyzer" else "opensmile"
        ident["package"] = f"{package}=={importlib.metadata.version(package)}"
    return ident


class ResemblyzerEncoder:
    """Resemblyzer's ``VoiceEncoder.embed_utterance``, batched across clips: every
    clip's 1.6 s partials go through the LSTM in one forward, then each clip's
    partial embeddings are averaged and L2-normalised (equal to the per-clip call)."""

    rate, min_coverage = 1.3, 0.75

    def __init__(self, device: str):
        from resemblyzer import VoiceEncoder

        self.model = VoiceEncoder(device, verbose=False, weights_fpath=encoder_file("resemblyzer")).eval()
        self.device = device

    def __call__(self, wavs: list[np.ndarray]) -> list[np.ndarray]:
        import torch
        from resemblyzer import audio, preprocess_wav

        mels, owner, out = [], [], [None] * len(wavs)
        for i, w in enumerate(wavs):
            with np.errstate(all="ignore"):
                w = preprocess_wav(w)  # volume normalisation, long silences trimmed
            if len(w) == 0 or not np.isfinite(w).all():
                out[i] = AudioError("no_speech", "Resemblyzer's voice detector finds no speech in it")
                continue
            wav_slices, mel_slices = self.model.compute_partial_slices(len(w), self.rate, self.min_coverage)
            if wav_slices[-1].stop >= len(w):
                w = np.pad(w, (0, wav_slices[-1].stop - len(w)), "constant")
            mel = audio.wav_to_mel_spectrogram(w)
            mels += [mel[s] for s in mel_slices]
            owner += [i] * len(mel_slices)
        if not mels:
            return out
        with torch.no_grad():
            partial = self.model(torch.from_numpy(np.stack(mels)).to(self.device)).cpu().numpy()
        owner_a = np.asarray(owner)
        for i in set(owner):
            raw = partial[owner_a == i].mean(axis=0)
            with np.errstate(invalid="ignore", divide="ignore"):
                out[i] = (raw / np.linalg.norm(raw)).astype(np.float32)
        return out


class EgemapsEncoder:
    """openSMILE eGeMAPSv02 functionals (88 values per clip); clips run in a thread
    pool (the engine releases the GIL), one ``Smile`` per thread."""

    def __init__(self, threads: int = 1):
        self.local = threading.local()
        self.pool = ThreadPoolExecutor(max(1, threads), thread_name_prefix="egemaps")

    def _one(self, wav: np.ndarray) -> np.ndarray:
        import opensmile

        smile = getattr(self.local, "smile", None)
        if smile is None:
            smile = self.local.smile = opensmile.Smile(feature_set=opensmile.FeatureSet.eGeMAPSv02,
                                                       feature_level=opensmile.FeatureLevel.Functionals)
        return smile.process_signal(wav, SAMPLE_RATE).to_numpy(dtype=np.float32).reshape(-1)

    def __call__(self, wavs: list[np.ndarray]) -> list[np.ndarray]:
        return list(self.pool.map(self._one, wavs))


class TorchScriptEncoder:
    """A lab's own encoder: ``torch.jit.load(path)``. ``forward(wav)`` takes (1, T)
    float32 16 kHz audio and returns (1, D) or (D,): called clip by clip; a module
    whose ``forward(wav, lengths)`` also takes the lengths gets zero-padded
    (B, T) batches and returns (B, D)."""

    def __init__(self, path: str, device: str):
        import torch

        self.module = torch.jit.load(path, map_location=device).eval()
        self.device = device
        self.batched = len(self.module.forward.schema.arguments) >= 3  # self, wav, lengths

    def __call__(self, wavs: list[np.ndarray]) -> list[np.ndarray]:
        import torch

        with torch.no_grad():
            if not self.batched:
                return [self._vector(self.module(torch.from_numpy(w)[None].to(self.device))) for w in wavs]
            lens = torch.tensor([len(w) for w in wavs])
            x = torch.zeros(len(wavs), int(lens.max()))
            for i, w in enumerate(wavs):
                x[i, :len(w)] = torch.from_numpy(w)
            out = self.module(x.to(self.device), lens.to(self.device))
            return [self._vector(out[i]) for i in range(len(wavs))]

    @staticmethod
    def _vector(t) -> np.ndarray:
        return t.detach().float().cpu().numpy().reshape(-1)


def make_encoder(spec: str, device: str, threads: int = 1):
    if spec.startswith("torchscript:"):
        return TorchScriptEncoder(str(encoder_file(spec)), device)
    if spec == "resemblyzer":
        return ResemblyzerEncoder(device)
    if spec == "egemaps":
        return EgemapsEncoder(threads)
    raise SystemExit(f"unknown encoder {spec!r}: use resemblyzer, egemaps or torchscript:<path>")


class Encoders:
    """The condition and emotion encoders of a run; ``__call__`` runs both on a batch
    of clips, the emotion encoder in a second thread while the first runs."""

    def __init__(self, p: TtsParams, device: str, threads: int = 1, log=sys.stderr):
        self.condition = make_encoder(p.condition, device, threads)
        self.emotion = make_encoder(p.emotion, device, threads)
        self.side = ThreadPoolExecutor(1, thread_name_prefix="emotion")
        self.device = device
        print(f"tts: condition encoder {p.condition}, emotion encoder {p.emotion}, on {device}",
              file=log, flush=True)

    def __call__(self, wavs: list[np.ndarray]) -> list[tuple[np.ndarray, np.ndarray]]:
        emo = self.side.submit(self.emotion, wavs)
        try:
            cond = self.condition(wavs)
        finally:
            emo_vecs = emo.result()
        if not len(cond) == len(emo_vecs) == len(wavs):
            raise RuntimeError(f"encoders returned {len(cond)} and {len(emo_vecs)} vectors for {len(wavs)} clips")
        return list(zip(cond, emo_vecs))


# ---------------------------------------------------------------------------
# the audio-feature job of a shard
# ---------------------------------------------------------------------------
def artifact(root: Path, kind: str, seg_id: str) -> Path:
    return root / kind / f"{file_stem(seg_id)}.npy"


def artifacts_ok(root: Path, seg_id: str, n_codes: int) -> bool:
    """All three feature arrays load with their dtype and shape (a truncated file does not)."""
    codes = load_npy(artifact(root, "codes", seg_id), np.int32, 1)
    if codes is None or len(codes) != n_codes:
        return False
    return all(load_npy(artifact(root, k, seg_id), np.float32, 1) is not None for k in ("condition", "emo_vec"))


def _units_and_s2s_rejects(units_path: str, s2s_rejects_path: str | None):
    units = {u["id"]: u["units"] for u in read_jsonl(units_path)}
    s2s_rejects = {r["id"]: r for r in read_jsonl(s2s_rejects_path)} if s2s_rejects_path else {}
    return units, s2s_rejects


def run_features(asr_path: str, units_path: str, s2s_rejects_path: str | None, index_out: str,
                 rejects_out: str, out_dir: str, p: TtsParams, scratch: str, threads: int = 1,
                 encoders: Callable | None = None, log=sys.stderr) -> dict[str, int]:
    """Codes, condition and emotion vectors for every segment of a shard (resumable).

    Writes ``out_dir/{codes,condition,emo_vec}/<id>.npy``, the index ``index_out``
    (one line per accepted segment: its fields, the normalised text, feature paths
    and lengths) and ``rejects_out``.
    """
    from .batching import BatchRunner, is_oom, resolve_device, seconds_budget

    segments = list(read_jsonl(asr_path))
    units, s2s_rejects = _units_and_s2s_rejects(units_path, s2s_rejects_path)
    name = Path(asr_path).name.split(".")[0]
    norm = TextNormalizer(p.languages)
    ident = {"condition": encoder_identity(p.condition, p.hash_cache),
             "emotion": encoder_identity(p.emotion, p.hash_cache)}
    root = Path(scratch).with_suffix("")  # arrays wait here until the shard is done
    fp = {k: v for k, v in asdict(p).items() if k not in ("model_failure", "hash_cache")}
    ck = Checkpoint(scratch, fingerprint(asr_path, {**fp, **ident, "units": sha256_file(units_path)},
                                         ALGORITHM_VERSION))
    done = ck.load()
    accepted: dict[str, dict] = {}
    todo = []
    for s in segments:
        sid = s["id"]
        text = norm(s.get("text") or "", s.get("language") or p.language)
        r = None
        if not text:
            r = reject(sid, s.get("audio_filepath"), STAGE, "no_text",
                       f"no text after normalisation (transcript: {s.get('text')!r})")
        elif sid not in units:
            why = s2s_rejects.get(sid)
            r = reject(sid, s.get("audio_filepath"), STAGE, "no_codes",
                       f"S2S rejected it ({why['reason']}: {why['detail']})" if why else "no S2S units for this segment")
        if r is not None:
            done[sid] = {"id": sid, "reject": r}
            continue
        accepted[sid] = {**s, "text": text}
        prior = done.get(sid)
        if prior and ("reject" in prior or artifacts_ok(root, sid, len(units[sid]))):
            continue
        done.pop(sid, None)
        todo.append(s)
    print(f"tts[{name}]: {len(segments)} segments, {len(segments) - len(todo)} done or rejected "
          f"(checkpoint {scratch}), {len(todo)} to process", file=log, flush=True)

    progress = Progress(f"tts[{name}]", len(todo), log=log, unit="segments")
    ck.start()
    try:
        if todo:
            device = resolve_device(p.device)
            encoders = encoders or Encoders(p, device, threads, log)
            budget = seconds_budget(device, p.cpu_batch_seconds, p.seconds_per_gib, p.gpu_reserve_gib,
                                    p.max_batch_seconds)

            def encode(clips: list[np.ndarray]) -> list:
                """Vectors per clip; a clip the encoders fail on (other than OOM, which
                BatchRunner handles) becomes an ``encoder_error``, the rest still run."""
                try:
                    return encoders(clips)
                except Exception as e:  # noqa: BLE001
                    if is_oom(e):
                        raise
                    if len(clips) == 1:
                        return [AudioError("encoder_error", f"{type(e).__name__}: {e}")]
                    return [v for c in clips for v in encode([c])]

            def infer(batch: list[tuple[dict, Any]]) -> list:
                ok = [i for i, (_, a) in enumerate(batch) if not isinstance(a, AudioError)]
                vecs = encode([batch[i][1] for i in ok]) if ok else []
                out: list[Any] = [a for _, a in batch]
                for i, v in zip(ok, vecs):
                    out[i] = v
                return out

            def load(s: dict):
                try:
                    return read_segment(s, SAMPLE_RATE, p.min_duration, "tts.min_duration")
                except AudioError as e:
                    return e

            runner = BatchRunner(budget=budget, duration=lambda it: float(it[0]["duration"]), infer=infer,
                                 logger=lambda m: print(f"tts[{name}]: {m}", file=log, flush=True))
            failures = ModelFailures(STAGE, f"{p.condition} + {p.emotion}", FailureRule.from_dict(p.model_failure))
            for plan in runner.plan([(s, None) for s in todo]):
                batch = [(s, load(s)) for s, _ in plan]
                for o in runner.run(batch):
                    s, result = o.item[0], o.result
                    line = _finish(s, result, o.oom, units[s["id"]], root)
                    ck.append(line)
                    progress.update(audio_seconds=float(s["duration"]))
                    if "reject" not in line:
                        failures.success()
                    elif line["reject"]["reason"] in MODEL_ERRORS:
                        failures.error(s["id"], line["reject"]["detail"])
            failures.finish()
    except BaseException:
        ck.close(remove=False)
        raise
    progress.finish()

    out = Path(out_dir).resolve()
    lines, rejects = [], []
    for s in segments:
        r = done[s["id"]]
        if "reject" in r:
            rejects.append(r["reject"])
            continue
        seg = accepted[s["id"]]
        line = {k: seg[k] for k in ("id", "text", "audio_filepath", "offset", "duration") if k in seg}
        for k in ("speaker", "language"):
            if seg.get(k) is not None:
                line[k] = seg[k]
        if "language" not in line and p.language:
            line["language"] = p.language
        for kind, length in zip(FEATURES, ("codes_len", "condition_dim", "emo_vec_dim")):
            dest = artifact(out, kind, s["id"])
            line[kind] = str(dest)
            line[length] = r[length]
        lines.append(line)
    for kind in FEATURES:
        (out / kind).mkdir(parents=True, exist_ok=True)
        for line in lines:
            os.replace(artifact(root, kind, line["id"]), line[kind])
    write_jsonl(index_out, lines)
    write_jsonl(rejects_out, rejects)
    ck.close(remove=True)
    shutil.rmtree(root, ignore_errors=True)
    counts = {"segments": len(segments), "ok": len(lines), "rejected": len(rejects)}
    print(f"tts[{name}]: done {counts}", file=log, flush=True)
    return counts


def _finish(s: dict, result: Any, oom: bool, units: list[int], root: Path) -> dict:
    """Check one segment's vectors and write its three arrays to scratch: the checkpoint line."""
    sid, path = s["id"], s.get("audio_filepath")
    if oom:
        return {"id": sid, "reject": reject(sid, path, STAGE, "oom", "out of memory even as a single segment")}
    if isinstance(result, AudioError):
        return {"id": sid, "reject": reject(sid, path, STAGE, result.reason, result.detail)}
    cond, emo = result
    for what, v in (("condition", cond), ("emotion", emo)):
        if isinstance(v, AudioError):
            return {"id": sid, "reject": reject(sid, path, STAGE, v.reason, f"{what} encoder: {v.detail}")}
        if v.size == 0 or not np.isfinite(v).all():
            return {"id": sid, "reject": reject(sid, path, STAGE, "non_finite",
                                                f"the {what} vector is not finite (silent or degenerate audio?)")}
    save_npy(artifact(root, "codes", sid), np.asarray(units, dtype=np.int32))
    save_npy(artifact(root, "condition", sid), cond.astype(np.float32))
    save_npy(artifact(root, "emo_vec", sid), emo.astype(np.float32))
    return {"id": sid, "codes_len": len(units), "condition_dim": int(cond.size), "emo_vec_dim": int(emo.size)}


# ---------------------------------------------------------------------------
# the text job of a shard, and the tokenizer
# ---------------------------------------------------------------------------
def run_text(index_path: str, tokenizer: str, index_out: str, ids_dir: str, log=sys.stderr) -> int:
    """int32 SentencePiece ids of every accepted segment's normalised text."""
    sp = load_tokenizer(tokenizer)
    out = Path(ids_dir).resolve()
    out.mkdir(parents=True, exist_ok=True)
    lines = []
    for seg in read_jsonl(index_path):
        ids = text_ids(sp, seg["text"])
        if len(ids) == 0:
            raise SystemExit(f"{seg['id']}: tokenizer {tokenizer} gives no ids for {seg['text']!r}")
        dest = out / f"{file_stem(seg['id'])}.npy"
        save_npy(dest, ids)
        lines.append({"id": seg["id"], "text_ids": str(dest), "text_ids_len": len(ids)})
    write_jsonl(index_out, lines)
    print(f"tts text ids: {len(lines)} segments from {index_path} with {tokenizer} "
          f"({sp.get_piece_size()} pieces)", file=log, flush=True)
    return len(lines)


def train_corpus_tokenizer(asr_manifests: dict[str, str], languages: dict[str, str | None],
                           options: dict, vocab_size: int, model_out: str, log=sys.stderr) -> None:
    """Train the tokenizer on the normalised transcripts of every dataset
    (``asr_manifests``: dataset -> asr/manifest.jsonl; ``languages``: dataset -> default)."""
    norm = TextNormalizer(options)
    texts = [norm(s.get("text") or "", s.get("language") or languages.get(ds))
             for ds, path in asr_manifests.items() for s in read_jsonl(path)]
    texts = [t for t in texts if t]
    if not texts:
        raise SystemExit("no transcript has text: nothing to train the tokenizer on "
                         "(set tts.tokenizer to an existing SentencePiece model)")
    train_tokenizer(texts, model_out, vocab_size)
    sp = load_tokenizer(model_out)
    print(f"tts tokenizer: {model_out} ({sp.get_piece_size()} pieces, asked {vocab_size}) "
          f"from {len(texts)} transcripts", file=log, flush=True)


# ---------------------------------------------------------------------------
# manifests and stats
# ---------------------------------------------------------------------------
def is_val(seg_id: str, val_ratio: float) -> bool:
    """Deterministic split by a hash of the id: an id keeps its split when the corpus grows."""
    h = int.from_bytes(hashlib.sha256(seg_id.encode("utf-8")).digest()[:8], "big")
    return h / 2**64 < val_ratio


def _strip(cfg: Any) -> Any:
    if isinstance(cfg, dict):
        return {k: _strip(v) for k, v in cfg.items() if k != "threads"}
    return cfg


def config_digest(cfg: dict) -> str:
    """sha256 of the config (as JSON, keys sorted), without the resource-only ``threads`` keys."""
    return hashlib.sha256(json.dumps(_strip(cfg), sort_keys=True).encode("utf-8")).hexdigest()


def _file_entry(role: str, path: str) -> dict[str, str]:
    return {"role": role, "path": str(Path(path).resolve()), "sha256": sha256_file(path)}


def model_files(cfg: dict, tokenizer: str) -> list[dict[str, str]]:
    """Every model file the chain read: ASR, S2S, tokenizer, the two encoders."""
    from .models import is_local_model

    files = []
    if is_local_model(cfg["asr"]["model"]):
        files.append(_file_entry("asr", cfg["asr"]["model"]))
    else:
        files.append({"role": "asr", "path": cfg["asr"]["model"], "sha256": None})
    for key in ("hubert", "kmeans", "vocoder", "vocoder_config"):
        files.append(_file_entry(f"s2s.{key}", cfg["s2s"][key]))
    files.append(_file_entry("tts.tokenizer", tokenizer))
    for role in ("condition", "emotion"):
        ident = encoder_identity(cfg["tts"][role])
        files.append({"role": f"tts.{role}", "path": ident["path"], "sha256": ident["sha256"]})
    return files


PACKAGES = ("torch", "numpy", "sentencepiece", "resemblyzer", "opensmile", "soundfile", "soxr")


def package_versions() -> dict[str, Any]:
    """Versions in this (tts) environment, and the pins of the stages before it."""
    from .envspec import env_file, pinned_packages

    here = {}
    for name in PACKAGES:
        try:
            here[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            here[name] = None
    pins = {}
    for stage, names in (("vad", ("ten-vad",)), ("asr", ("nemo-toolkit", "torch")),
                         ("s2s", ("fairseq-fixed", "torch"))):
        pinned = {re.sub(r"[-_.]+", "-", k).lower(): v for k, v in pinned_packages(env_file(stage)).items()}
        pins[stage] = {n: pinned.get(n) for n in names}
    return {"tts": here, "pinned": pins, "python": sys.version.split()[0]}


def build_manifests(ds: str, features: list[str], texts: list[str], rejects: list[str], tokenizer: str,
                    cfg: dict, train_out: str, val_out: str, stats_out: str) -> dict[str, Any]:
    """Train/val manifests of a dataset and its ``stats.json``."""
    val_ratio = float(cfg["tts"]["val_ratio"])
    ids = {t["id"]: t for path in texts for t in read_jsonl(path)}
    split: dict[str, list[dict]] = {"train": [], "val": []}
    for path in features:
        for f in read_jsonl(path):
            t = ids.pop(f["id"], None)
            if t is None:
                raise SystemExit(f"{f['id']} has audio features but no text ids: rerun tts_text for {path}")
            line = {"id": f["id"], "dataset": ds, **{k: v for k, v in f.items() if k != "id"}, **t}
            split["val" if is_val(f["id"], val_ratio) else "train"].append(line)
    if ids:
        raise SystemExit(f"text ids without audio features: {sorted(ids)[:5]}")
    for lines in split.values():
        lines.sort(key=lambda x: x["id"])
    write_jsonl(train_out, split["train"])
    write_jsonl(val_out, split["val"])

    reasons: dict[str, int] = {}
    n_rejects = 0
    for path in rejects:
        for r in read_jsonl(path):
            reasons[r["reason"]] = reasons.get(r["reason"], 0) + 1
            n_rejects += 1
    sp = load_tokenizer(tokenizer)
    stats = {
        "dataset": ds,
        "counts": {"train": len(split["train"]), "val": len(split["val"]), "rejected": n_rejects},
        "hours": {k: round(sum(x["duration"] for x in v) / 3600, 6) for k, v in split.items()},
        "rejects_by_reason": dict(sorted(reasons.items())),
        "val_ratio": val_ratio,
        "manifests": {"train": str(Path(train_out).resolve()), "val": str(Path(val_out).resolve())},
        "tokenizer": {"path": str(Path(tokenizer).resolve()), "sha256": sha256_file(tokenizer),
                      "vocab_size": sp.get_piece_size()},
        "models": model_files(cfg, tokenizer),
        "packages": package_versions(),
        "config_sha256": config_digest(cfg),
    }
    _write_json(stats_out, stats)
    return stats


def combine(stats_paths: list[str], train_paths: list[str], val_paths: list[str], train_out: str,
            val_out: str, stats_out: str) -> dict[str, Any]:
    """One train/val pair across datasets (lines keep their ``dataset``)."""
    for paths, out in ((train_paths, train_out), (val_paths, val_out)):
        write_jsonl(out, (line for p in paths for line in read_jsonl(p)))
    per = []
    for p in stats_paths:
        with open(p, encoding="utf-8") as f:
            per.append(json.load(f))
    reasons: dict[str, int] = {}
    for s in per:
        for k, v in s["rejects_by_reason"].items():
            reasons[k] = reasons.get(k, 0) + v
    first = per[0]
    stats = {
        "datasets": [s["dataset"] for s in per],
        "counts": {k: sum(s["counts"][k] for s in per) for k in ("train", "val", "rejected")},
        "hours": {k: round(sum(s["hours"][k] for s in per), 6) for k in ("train", "val")},
        "rejects_by_reason": dict(sorted(reasons.items())),
        "val_ratio": first["val_ratio"],
        "manifests": {"train": str(Path(train_out).resolve()), "val": str(Path(val_out).resolve())},
        "tokenizer": first["tokenizer"], "models": first["models"], "packages": first["packages"],
        "config_sha256": first["config_sha256"],
        "per_dataset": {s["dataset"]: {"counts": s["counts"], "hours": s["hours"]} for s in per},
    }
    _write_json(stats_out, stats)
    return stats


def _write_json(path: str, obj: Any) -> None:
    with atomic_open(path) as f:
        json.dump(obj, f, indent=2, ensure_ascii=False)
        f.write("\n")
