"""Speaker encoders a lab brings as ONNX, with the Kaldi fbank front end of the project
that trained them (computed by kaldi-native-fbank):

* WeSpeaker: input ``feats`` (B, T, 80) float32 -> output ``embs`` (B, D);
* 3D-Speaker (CAM++, ERes2Net, ...): input ``feature`` (B, T, 80) -> output ``embedding`` (B, D).

:class:`OnnxSpeakerEncoder` finds the convention from the graph's input and output
names. Nothing heavy (onnxruntime, kaldi-native-fbank) is imported until used.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np

from ..errors import UsageError
from ..io.audio import SAMPLE_RATE, AudioError
from . import unit_vector

log = logging.getLogger("speechprep.encoders")

# Both projects compute torchaudio.compliance.kaldi.fbank (Kaldi's algorithm) on 16 kHz
# audio and subtract each bin's mean over time (CMN, no variance normalisation):
# WeSpeaker (github.com/wenet-e2e/wespeaker, dfa7419): wespeaker/bin/infer_onnx.py compute_fbank
# (as wespeaker/dataset/processor.py compute_fbank + apply_cmvn, wespeaker/cli/speaker.py):
# waveform * (1 << 15), 80 bins, 25/10 ms, dither 0, hamming window, use_energy=False; the
# names feats -> embs from wespeaker/bin/export_onnx.py.
# 3D-Speaker (github.com/modelscope/3D-Speaker, 09e7806): speakerlab/process/processor.py FBank
# as speakerlab/bin/infer_sv.py calls it: FBank(80, 16000, mean_nor=True), dither 0, the waveform
# as torchaudio.load returns it (in [-1, 1], unscaled), torchaudio's default povey window and
# 25/10 ms; the names feature -> embedding from speakerlab/bin/export_speaker_embedding_onnx.py.
# What both leave at torchaudio's defaults (Kaldi's) is spelled out here.
NUM_MEL_BINS = 80
FRAME_LENGTH_MS = 25.0
FRAME_SHIFT_MS = 10.0
DITHER = 0.0
PREEMPHASIS = 0.97
REMOVE_DC_OFFSET = True
ROUND_TO_POWER_OF_TWO = True
SNIP_EDGES = True  # no frame for a clip shorter than FRAME_SAMPLES
LOW_FREQ, HIGH_FREQ = 20.0, 0.0  # Hz; 0: the Nyquist frequency
USE_ENERGY = False
ENERGY_FLOOR = 1.0  # torchaudio's default; used only with USE_ENERGY
LOG_FLOOR = float(np.finfo(np.float32).eps)  # mel energies floored before the log (Kaldi, torchaudio)
FRAME_SAMPLES = int(SAMPLE_RATE * FRAME_LENGTH_MS / 1000)
MAX_BATCH = 32  # clips of equal frame count run together, this many at most


@dataclass(frozen=True)
class Convention:
    """A project's ONNX interface and front end."""

    input: str
    output: str
    window: str  # Kaldi window type
    scale: float  # the waveform (in [-1, 1]) is multiplied by this before the fbank


CONVENTIONS = {
    "wespeaker": Convention("feats", "embs", "hamming", float(1 << 15)),
    "3d-speaker": Convention("feature", "embedding", "povey", 1.0),
}


def _options(convention: Convention):
    import kaldi_native_fbank as knf

    o = knf.FbankOptions()
    f = o.frame_opts
    f.samp_freq, f.frame_length_ms, f.frame_shift_ms = float(SAMPLE_RATE), FRAME_LENGTH_MS, FRAME_SHIFT_MS
    f.dither, f.preemph_coeff, f.remove_dc_offset = DITHER, PREEMPHASIS, REMOVE_DC_OFFSET
    f.window_type, f.round_to_power_of_two, f.snip_edges = convention.window, ROUND_TO_POWER_OF_TWO, SNIP_EDGES
    m = o.mel_opts
    m.num_bins, m.low_freq, m.high_freq = NUM_MEL_BINS, LOW_FREQ, HIGH_FREQ
    o.use_energy, o.energy_floor, o.use_log_fbank, o.use_power = USE_ENERGY, ENERGY_FLOOR, True, True
    o.use_log_floor, o.eps = True, LOG_FLOOR
    return o


def kaldi_fbank(wav: np.ndarray, convention: str) -> np.ndarray:
    """(T, 80) float32 mean-normalised log mel filterbank of a 16 kHz clip, as the
    project ``convention`` (a key of :data:`CONVENTIONS`) computes it before its model."""
    import kaldi_native_fbank as knf

    if convention not in CONVENTIONS:
        raise UsageError(f"unknown speaker-encoder convention {convention!r}: {', '.join(CONVENTIONS)}")
    c = CONVENTIONS[convention]
    x = np.asarray(wav, dtype=np.float32).reshape(-1)
    fb = knf.OnlineFbank(_options(c))
    fb.accept_waveform(float(SAMPLE_RATE), x * np.float32(c.scale))
    fb.input_finished()
    n = fb.num_frames_ready
    if n == 0:
        return np.zeros((0, NUM_MEL_BINS), dtype=np.float32)
    feats = np.stack([fb.get_frame(i) for i in range(n)])  # get_frame's buffer is the extractor's: copied
    return (feats - feats.mean(axis=0)).astype(np.float32)


def _providers(device: str) -> list:
    import onnxruntime as ort

    if device.startswith("cuda"):
        if "CUDAExecutionProvider" in ort.get_available_providers():
            index = int(device.partition(":")[2] or 0)
            return [("CUDAExecutionProvider", {"device_id": index}), "CPUExecutionProvider"]
        log.warning("speaker encoder: onnxruntime has no CUDA provider here; running on the CPU")
    return ["CPUExecutionProvider"]


class OnnxSpeakerEncoder:
    """A WeSpeaker or 3D-Speaker ONNX speaker model: 16 kHz mono float32 clips -> one
    L2-normalised float32 vector each (or an :class:`AudioError` for an unusable clip).
    Clips with the same number of frames run as one batch; the others one at a time."""

    package = "onnxruntime"

    def __init__(self, path: str, device: str, threads: int):
        import onnxruntime as ort

        self.path = str(path)
        so = ort.SessionOptions()
        so.intra_op_num_threads = max(1, int(threads))
        so.inter_op_num_threads = 1
        so.log_severity_level = 3  # errors only
        try:
            self.session = ort.InferenceSession(self.path, so, providers=_providers(device))
        except Exception as e:  # onnxruntime raises its own types (InvalidProtobuf, NoSuchFile, Fail, ...)
            reason = " ".join(str(e).split())[:200]
            raise UsageError(f"{self.path}: not an ONNX model onnxruntime can load ({reason})") from e
        inputs = {i.name: i for i in self.session.get_inputs()}
        outputs = {o.name: o for o in self.session.get_outputs()}
        found = [k for k, c in CONVENTIONS.items() if list(inputs) == [c.input] and c.output in outputs]
        if not found:
            raise UsageError(
                f"{self.path}: inputs {list(inputs)}, outputs {list(outputs)}: neither WeSpeaker's "
                "(feats -> embs) nor 3D-Speaker's (feature -> embedding) speaker-model convention"
            )
        self.convention = found[0]
        c = CONVENTIONS[self.convention]
        self.input, self.output = c.input, c.output
        shape = inputs[c.input].shape
        if len(shape) != 3 or (isinstance(shape[2], int) and shape[2] != NUM_MEL_BINS):
            raise UsageError(
                f"{self.path}: input {c.input!r} has shape {shape}; the {self.convention} convention is "
                f"(batch, frames, {NUM_MEL_BINS})"
            )
        dim = outputs[c.output].shape[-1] if outputs[c.output].shape else None
        if not isinstance(dim, int):  # a symbolic size: ask the model
            probe = np.zeros((1, 200, NUM_MEL_BINS), dtype=np.float32)  # 2 s of frames
            dim = int(self.session.run([self.output], {self.input: probe})[0].shape[-1])
        self.dim = dim

    def __repr__(self) -> str:
        return f"OnnxSpeakerEncoder({self.path!r}, {self.convention}, dim={self.dim})"

    def __call__(self, clips: list[np.ndarray]) -> list[np.ndarray | AudioError]:
        out: list = [None] * len(clips)
        by_frames: dict[int, list[tuple[int, np.ndarray]]] = {}
        for i, clip in enumerate(clips):
            w = np.asarray(clip, dtype=np.float32).reshape(-1)
            if not np.isfinite(w).all():
                out[i] = AudioError("non_finite", "NaN or infinite samples")
            elif len(w) < FRAME_SAMPLES:
                out[i] = AudioError(
                    "too_short", f"{len(w)} samples: a speaker vector needs at least {FRAME_SAMPLES} (25 ms)"
                )
            else:
                feats = kaldi_fbank(w, self.convention)
                by_frames.setdefault(len(feats), []).append((i, feats))
        for group in by_frames.values():
            for start in range(0, len(group), MAX_BATCH):
                part = group[start : start + MAX_BATCH]
                x = np.stack([f for _, f in part])
                y = np.asarray(self.session.run([self.output], {self.input: x})[0], dtype=np.float64)
                y = y.reshape(len(part), -1)
                for (i, _), v in zip(part, y):
                    out[i] = unit_vector(v, self.path)
        return out
