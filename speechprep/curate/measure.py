"""The measure job of a shard (rule ``curate_measure``), on the model-batch runner
(:mod:`speechprep.core.modelstage`).

Per segment: DNSMOS (P.835 and P.808), loudness, peak, clipping, DC offset, SNR
in the speech band against the file's own non-speech, bandwidth, speaking rate,
text/unit ratio, a PCM hash, a MinHash signature of its units, an acoustic
fingerprint (:mod:`.fingerprint`) and a speaker embedding (``speakers.model``:
Resemblyzer's by default). Writes
``<s>.measures.jsonl`` (one line per measured segment: its fields + every
measure), ``<s>.embeddings.npy`` (float32 (N, dim): 256 for Resemblyzer; row i = line i),
``<s>.minhash.npy`` (uint64 (N, minhash_perm), row i = line i, zeros where
``minhash`` is false), ``<s>.fingerprint.npy`` (:data:`.fingerprint.DTYPE` (N,),
row i = line i, zeros where ``fingerprint`` is false) and ``<s>.measure_rejects.jsonl`` (segments
whose audio could not be measured; every reject carries the segment's
``offset`` and ``duration``, as the summary counts hours).
"""

from __future__ import annotations

import importlib.metadata
import logging
from concurrent.futures import ThreadPoolExecutor
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np

from ..core import modelstage
from ..core.artifacts import Kind
from ..core.modelstage import Accepted, ModelStage, Outcome, Rejected, ShardFiles
from ..encoders import ResemblyzerEncoder, encoder_file, make_encoder
from ..io.audio import SAMPLE_RATE, AudioError, read_segment
from ..io.jsonio import read_jsonl
from ..io.modelfiles import sha256_cached
from ..io.npyio import save_npy
from . import fingerprint as FP
from . import measures as M
from .decide import STAGE
from .duplicates import minhash_signature
from .nonspeech import NonSpeech
from .params import MeasureParams
from .texts import spoken_facts

log = logging.getLogger("speechprep.curate")


def signal_measures(
    x: np.ndarray, seg: dict, units: list[int] | None, p: MeasureParams, noise: list[np.ndarray]
) -> dict[str, Any]:
    """Every model-free measure of one decoded segment (16 kHz float32); ``noise``:
    pieces of its file's non-speech (:class:`~speechprep.curate.nonspeech.NonSpeech`), for the SNR."""
    duration = len(x) / SAMPLE_RATE
    cps, wps = M.speaking_rate(seg.get("text"), duration)
    return {
        "lufs": M.lufs(x, SAMPLE_RATE),
        "peak_dbfs": M.peak_dbfs(x),
        "clipping_ratio": M.clipping_ratio(x, p.clip_level),
        "dc_offset": M.dc_offset(x),
        "snr_db": M.snr_db(x, noise, SAMPLE_RATE, tuple(p.snr_band_hz)),
        "bandwidth_hz": M.bandwidth_hz(x, SAMPLE_RATE, p.bandwidth_floor_db),
        "chars_per_s": cps,
        "words_per_s": wps,
        "text_unit_ratio": M.text_unit_ratio(seg.get("text"), units),
        "n_units": len(units) if units is not None else None,
        "pcm_sha256": M.pcm_sha256(x),
    }


def _one_torch_thread() -> None:
    import torch

    torch.set_num_threads(1)  # this thread's (OpenMP and MKL keep the count per thread)


class Models:
    """DNSMOS and the speaker encoder (``speakers.model``; Resemblyzer's by default) over a batch of clips:
    ``models(clips) -> [(dnsmos scores, embedding or AudioError)]``. DNSMOS scores
    ``threads`` clips at a time; with more than one thread the speaker encoder runs beside
    it, in a thread of its own on one torch thread: its LSTM's small matrix products cost a
    second thread more waiting than computing (on two busy cores ten times the CPU of one
    thread, 12 % more on idle ones; docs/benchmarks.md). With one thread they run one after
    the other (the job has set torch's threads to one)."""

    def __init__(self, p: MeasureParams, device: str, threads: int):
        from .dnsmos import Dnsmos

        self.dnsmos = Dnsmos(p.dnsmos_personalized, threads)
        self.speaker = make_encoder(p.speaker_model, device, threads)
        self.speaker_dim = int(self.speaker.dim)
        self.language = None
        if p.language_model:
            from ..encoders.nemo_speaker import NemoLanguageId

            self.language = NemoLanguageId(p.language_model, device, threads)
        self.side = None
        if threads > 1:
            self.side = ThreadPoolExecutor(1, thread_name_prefix="speaker", initializer=_one_torch_thread)

    def __call__(self, clips: list[np.ndarray]) -> list[tuple[dict, np.ndarray | AudioError, dict | None]]:
        languages = self.language(clips) if self.language is not None else [None] * len(clips)
        if self.side is None:
            return list(zip(self.dnsmos(clips), self.speaker(clips), languages, strict=True))
        embeddings = self.side.submit(self.speaker, clips)
        try:
            scores = self.dnsmos(clips)
        finally:
            vectors = embeddings.result()
        return list(zip(scores, vectors, languages, strict=True))


def model_identity(p: MeasureParams) -> dict[str, Any]:
    """What the measurements depend on beyond the parameters: model files and packages."""
    from .dnsmos import model_files

    speaker = "resemblyzer" if p.speaker_model == "resemblyzer" else "speaker_model"
    files = {
        **{f"dnsmos_{k}": v for k, v in model_files(p.dnsmos_personalized).items()},
        speaker: encoder_file(p.speaker_model),
        **({"language_model": Path(p.language_model)} if p.language_model else {}),
    }
    ident = {k: {"path": str(v), "sha256": sha256_cached(v, p.hash_cache)} for k, v in files.items()}
    ident["packages"] = {
        n: importlib.metadata.version(n)
        for n in ("speechmos", "onnxruntime", "resemblyzer", "pyloudnorm", "datasketch", "librosa")
    }
    return ident


class MeasureStage(ModelStage):
    """Every measure of a shard's segments (``segments_path``: their file, whose pauses
    give each segment's noise). ``units_path``: the shard's S2S units;
    ``embeddings_out``/``minhash_out``/``fingerprint_out``: the shard's stacked rows;
    ``models``: loaded models (tests)."""

    stage = STAGE
    version = "3"
    # a fingerprint waits in scratch as its row's bytes (a structured dtype has no name)
    kinds = (Kind("embedding", "float32"), Kind("minhash", "uint64"), Kind("fingerprint", "uint8"))
    error_reason = "encoder_error"
    reject_fields = ("offset", "duration")

    def __init__(self, p: MeasureParams, segments_path: str, units_path: str, outs: tuple[str, str, str], models=None):
        super().__init__(p)
        self.non_speech = NonSpeech(read_jsonl(segments_path), p.snr_noise_seconds)
        self.units = {u["id"]: u["units"] for u in read_jsonl(units_path)}
        kinds = ("embedding", "minhash", "fingerprint")
        self.out = {k: str(Path(o).resolve()) for k, o in zip(kinds, outs, strict=True)}
        self.models = models

    @cached_property
    def identity(self) -> dict[str, Any]:
        return {"models": model_identity(self.p)}

    def keyed(self, s: dict) -> Any:
        """The line, its units (MinHash) and where its noise is read (SNR)."""
        return {"line": s, "units": self.units.get(s["id"]), "noise": self.non_speech.pieces(s)}

    def model_name(self) -> str:
        return f"DNSMOS + {self.p.speaker_model}"

    def screen(self, s: dict) -> Rejected | None:
        return modelstage.too_short(s, self.p.min_duration, "curate.min_duration")

    def load(self, device: str, threads: int) -> None:
        if self.models is None:
            self.models = Models(self.p, device, threads)

    def prepare(self, s: dict) -> tuple:
        x = read_segment(s, SAMPLE_RATE, self.p.min_duration, "curate.min_duration")
        u, p = self.units.get(s["id"]), self.p
        measured = signal_measures(x, s, u, p, self.non_speech.read(s))
        return x, measured, minhash_signature(u, p.minhash_ngram, p.minhash_perm), FP.fingerprint(x)

    def infer(self, inputs: list) -> list:
        return self.models([x for x, *_ in inputs])

    def accept(self, s: dict, prepared: Any, result: Any, scratch) -> Outcome:
        (scores, emb, language), (_, measured, sig, fp) = result, prepared
        if isinstance(emb, AudioError):  # the speaker encoder finds no voice in it
            return Rejected(emb.reason, f"speaker encoder: {emb.detail}")
        dnsmos = [scores["sig"], scores["bak"], scores["ovrl"], scores["p808"]]
        if emb.size != self.models.speaker_dim or not np.isfinite(emb).all() or not np.isfinite(dnsmos).all():
            return Rejected("non_finite", "a model returned NaN/Inf or a vector of another size", model_error=True)
        scratch.save("embedding", s["id"], emb)
        scratch.save("minhash", s["id"], sig if sig is not None else np.zeros(self.p.minhash_perm, np.uint64))
        row = fp if fp is not None else np.zeros((), FP.DTYPE)
        scratch.save("fingerprint", s["id"], np.frombuffer(row.tobytes(), np.uint8))
        names = ("dnsmos_sig", "dnsmos_bak", "dnsmos_ovrl", "dnsmos_p808")
        has = {"minhash": sig is not None, "fingerprint": fp is not None}
        spoken = spoken_facts(language) if isinstance(language, dict) else {}
        return Accepted({**dict(zip(names, dnsmos)), **measured, **has, **spoken})

    def line(self, s: dict, data: dict) -> dict:
        return {
            **s,
            **data,
            "embedding_file": self.out["embedding"],
            "embedding_row": None,  # below
            "minhash_file": self.out["minhash"],
        }

    def written(self, line: dict, row: int) -> None:
        line["embedding_row"] = row

    def finish(self, ids: list[str], scratch) -> dict[str, Any]:
        dim = self.models.speaker_dim if self.models is not None else ResemblyzerEncoder.dim  # width of an empty shard
        scratch.stack("embedding", ids, self.out["embedding"], dim)
        scratch.stack("minhash", ids, self.out["minhash"], self.p.minhash_perm)
        rows = [np.load(scratch.path("fingerprint", i), allow_pickle=False) for i in ids]
        fps = np.stack(rows).view(FP.DTYPE).reshape(len(rows)) if rows else np.zeros(0, FP.DTYPE)
        save_npy(self.out["fingerprint"], fps)
        return {}


def run(
    files: ShardFiles,
    p: MeasureParams,
    units: str,
    embeddings: str,
    minhash: str,
    fingerprint: str,
    threads=1,
    models=None,
):
    """Measure every segment of a shard (resumable per segment)."""
    stage = MeasureStage(p, files.items, units, (embeddings, minhash, fingerprint), models)
    return modelstage.run(stage, files, threads)
