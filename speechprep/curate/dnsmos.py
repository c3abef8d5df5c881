"""DNSMOS P.835 (SIG, BAK, OVRL) and P.808 MOS, batched, equal to ``speechmos.dnsmos.run``.

The ONNX models ship inside the ``speechmos`` wheel (MIT) and run through
onnxruntime. What ``speechmos.dnsmos.run`` does with one clip, and so what
this module reproduces for each clip:

* the clip (16 kHz) is repeated end to end (``np.append(audio, audio)``)
  until it is at least 9.01 s long;
* windows of 9.01 s start every second (``int(floor(len / sr) - 9.01) + 1``
  of them; a window cut short by float rounding is skipped, as there);
* P.835: each window's raw samples go into ``sig_bak_ovr.onnx``, whose raw
  outputs are mapped by speechmos's own polynomials
  (``DNSMOS.get_polyfit_val``, called here);
* P.808: a 120-band log-mel spectrogram of the window less its last 160
  samples (librosa's, n_fft 321, hop 160, ``power_to_db(ref=max)``, then
  ``(x + 40) / 40``) goes into ``model_v8.onnx``;
* the clip's scores are the means over its windows (identical windows of a
  repeated clip are computed once: :func:`distinct_windows`).

Sharing between overlapping windows: consecutive windows, one second (100 STFT
frames of 320 samples, hop 160) apart, share all but their edges. The P.835 model
is a CNN, run here in three parts, each a subgraph of the shipped ONNX file cut
with ``onnx`` at load time (no model file is changed or added):

* full: the framing, log-power STFT and four 3x3 convolutions at the full time
  resolution (96 % of the model's work; a frame's value depends on the 4 frames
  either side). It runs once over the frames the windows span, in chunks with 4
  frames of context either side; only each window's first and last 4 frames, which
  see the window's own zero padding, are computed again from its own 8 end frames.
  A repeated clip is periodic, so frames :func:`period_frames` apart hold the same
  samples: when that period is shorter than the span (a clip of whole milliseconds,
  as ASR's trimming writes them, often repeats every few hundred frames) only one
  period of frames is computed (:func:`_periodic`).
* mid: a 2x2 max pooling, a 3x3 convolution, a second pooling: one step is 4 frames,
  and a window starts on a step (100 is a multiple of 4). It too runs once over the
  span; each window's 2 first and 2 last steps come from its own 16 end frames.
* back: the rest, per window (a convolution, a pooling, a convolution, a global
  max, the dense head) on its 225 steps.

The P.808 spectrogram is likewise one STFT of the span (or of one period of it): a
window takes its frames from it, and its first and last frame (which reach into its
padding) from its own samples (:func:`_mel`: librosa's, in numpy). The results
equal the per-window models to float rounding (tests: within 1e-4 of
``speechmos.dnsmos.run`` on real short clips; 4.3e-6 at most from the per-window
batches of the version before, on 586 real telephone prompts).

Threads: each clip runs on one onnxruntime thread, and ``threads`` clips run at
once: two intra-op threads per model spend 25 % (an idle machine) to 70 % (a busy
one) more CPU on the same convolutions, waiting for each other (docs/benchmarks/curate.md,
"Curation on short clips").
"""

from __future__ import annotations

import importlib.util
import logging
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from ..core import spectral

log = logging.getLogger("speechprep.curate")

SAMPLE_RATE = 16000
HOP = 160  # STFT hop of both models (samples)
FRAME = 320  # P.835 frame length (samples)
WINDOW_FRAMES = 900  # P.835 frames per 9.01 s window
FRAMES_PER_S = SAMPLE_RATE // HOP
P808_SAMPLES = 144000  # the P.808 input: a 9.01 s window less its last HOP samples
MAX_WINDOWS = 9  # windows scored together (a 17 s span of frames)
# P.835 in three parts. Full: frames -> the last full-resolution map (four 3x3 convolutions:
# a frame's value depends on the frames EDGE either side). Mid: max pooling, a 3x3
# convolution, max pooling: one step is STEP frames and depends on the frames from MID_EDGE
# before its first to MID_EDGE + STEP - 1 after. Back: the rest, per window.
EDGE = 4
STEP = 4
MID_EDGE = 2
WINDOW_STEPS = WINDOW_FRAMES // STEP
EDGE_STEPS = 2  # steps at each end of a window that see its padding (through its EDGE frames or the mid part's)
MID_SLAB = 16  # frames a window's edge steps are computed from
_FRAMES_IN = "mos_estimator_logpow/concat:0"  # (N, frames, 320): the model's own framing output
_FULL = "mos_estimator_logpow/conv2d_3/Relu:0"  # (N, 32, frames, 161)
_SPLIT = "mos_estimator_logpow/max_pooling2d/MaxPool_1_conv0"  # (N, 32, frames / 4, 40)


def model_dir() -> Path:
    spec = importlib.util.find_spec("speechmos")
    if spec is None or spec.origin is None:
        from ..errors import UsageError

        raise UsageError("the speechmos package (DNSMOS models) is not installed in this environment")
    return Path(spec.origin).parent


def model_files(personalized: bool) -> dict[str, Path]:
    """The two ONNX files a run uses (for provenance)."""
    d = model_dir()
    return {
        "p835": d / ("pdnsmos_models" if personalized else "dnsmos_models") / "sig_bak_ovr.onnx",
        "p808": d / "dnsmos_models" / "model_v8.onnx",
    }


def windows(x: np.ndarray) -> tuple[np.ndarray, list[int]]:
    """speechmos's padding and windowing: the repeated clip and the start (in
    seconds) of each 9.01 s window it scores."""
    from speechmos.dnsmos import INPUT_LENGTH, SR

    n = int(INPUT_LENGTH * SR)
    audio = x
    while len(audio) < n:
        audio = np.append(audio, audio)
    hops = int(np.floor(len(audio) / SR) - INPUT_LENGTH) + 1
    starts = [i for i in range(hops) if len(audio[int(i * SR) : int((i + INPUT_LENGTH) * SR)]) >= n]
    return audio, starts


def distinct_windows(length: int, starts: list[int]) -> tuple[list[int], list[int]]:
    """The windows of a clip of ``length`` samples that differ, and how many times each
    occurs: the repeated clip is periodic (sample ``i`` is the clip's ``i mod length``), so
    windows whose starts are equal modulo ``length`` hold the same samples (a 2 s clip's 7
    windows are 2 distinct ones). Their scores are the same, so each is computed once and
    weighted by its count: the clip's mean is unchanged."""
    from speechmos.dnsmos import SR

    first: dict[int, int] = {}
    count: dict[int, int] = {}
    for s in starts:
        r = (s * SR) % length
        first.setdefault(r, s)
        count[r] = count.get(r, 0) + 1
    return list(first.values()), list(count.values())


def _frames(audio: np.ndarray, first: int, count: int) -> np.ndarray:
    """P.835 frames ``first .. first+count`` (320 samples, hop 160) of ``audio``."""
    view = np.lib.stride_tricks.sliding_window_view(audio, FRAME)[::HOP]
    return view[first : first + count]


def period_frames(length: int) -> int:
    """Frames after which the repeated clip's frames repeat: frame ``f`` starts at sample
    ``160 f`` of a signal of period ``length``, so frames ``P = length / gcd(length, 160)``
    apart hold the same samples (a 1.234 s clip: every 617 frames; a 1.2341 s one: 19,746)."""
    import math

    return length // math.gcd(length, HOP)


def _free_time_axis(model, dim_in: int, dim_out: int):
    del model.graph.value_info[:]
    model.graph.input[0].type.tensor_type.shape.dim[dim_in].dim_param = "frames"
    model.graph.output[0].type.tensor_type.shape.dim[dim_out].dim_param = "steps"
    return model.SerializeToString()


def _sessions(personalized: bool) -> dict:
    """The three parts of P.835 (full, mid, back) and P.808: one onnxruntime thread each."""
    import onnx
    import onnxruntime as ort
    from onnx.utils import Extractor

    files = model_files(personalized)
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.inter_op_num_threads = 1
    opts = {"sess_options": so, "providers": ["CPUExecutionProvider"]}
    full = onnx.shape_inference.infer_shapes(onnx.load(str(files["p835"])))
    ex = Extractor(full)
    parts = {
        "full": _free_time_axis(ex.extract_model([_FRAMES_IN], [_FULL]), 1, 2),
        "mid": _free_time_axis(ex.extract_model([_FULL], [_SPLIT]), 2, 2),
        "back": ex.extract_model([_SPLIT], [o.name for o in full.graph.output]).SerializeToString(),
        "p808": str(files["p808"]),
    }
    return {k: ort.InferenceSession(v, **opts) for k, v in parts.items()}


def _mel(y: np.ndarray) -> np.ndarray:
    """speechmos's P.808 mel power spectrogram (120 bands x frames) of ``y``:
    ``librosa.feature.melspectrogram(y, n_fft=321, hop_length=160, n_mels=120)``."""
    return spectral.melspectrogram(y, SAMPLE_RATE, FRAME + 1, HOP, 120)


def _periodic(block: np.ndarray, n: int, first: int, period: int, axis: int) -> np.ndarray:
    """``n`` frames along ``axis`` from ``block``, whose frames ``first .. first + period`` are one
    whole period: frame ``f`` beyond them is frame ``first + (f - first) mod period``."""
    if block.shape[axis] >= n:
        return block
    f = np.arange(n)
    idx = np.where(f < first + period, f, first + (f - first) % period)
    return np.take(block, idx, axis=axis)


class Dnsmos:
    """Scores clips: ``scorer(clips) -> [{sig, bak, ovrl, p808}]``; ``threads`` clips at a time.
    ``chunk_frames`` (a multiple of :data:`STEP`): frames per run of P.835's full-resolution
    part (its memory: about 90 KB a frame)."""

    def __init__(self, personalized: bool = False, threads: int = 1, chunk_frames: int = 512):
        import onnxruntime as ort

        if chunk_frames % STEP:
            raise ValueError(f"chunk_frames must be a multiple of {STEP}")
        self.personalized = personalized
        self.chunk = chunk_frames
        self.sessions = _sessions(personalized)
        self.pool = ThreadPoolExecutor(threads, thread_name_prefix="dnsmos") if threads > 1 else None
        log.info(
            "DNSMOS %s + P.808 from %s (onnxruntime %s, %d clips at a time)",
            "personalized P.835" if personalized else "P.835",
            model_files(personalized)["p835"].parent.parent,
            ort.__version__,
            max(1, threads),
        )

    def _run(self, part: str, x: np.ndarray) -> np.ndarray:
        sess = self.sessions[part]
        return sess.run(None, {sess.get_inputs()[0].name: np.ascontiguousarray(x, dtype=np.float32)})[0]

    # -- P.835 -----------------------------------------------------------------
    def _chunked(self, part: str, x: np.ndarray, edge: int, per: int) -> np.ndarray:
        """``part`` over the frames of ``x`` (time on its second-to-last axis) in chunks of
        ``self.chunk`` frames, each with ``edge`` frames of context either side (none past
        ``x``'s ends); ``per``: frames per output step. The output's time is its axis 1."""
        n, out = x.shape[-2], []
        for a in range(0, n, self.chunk):
            b = min(a + self.chunk, n)
            lo, hi = max(0, a - edge), min(n, b + edge)
            y = self._run(part, x[None, ..., lo:hi, :])[0]
            out.append(y[:, (a - lo) // per : (b - lo) // per])
        return np.concatenate(out, axis=1)

    def _full_map(self, audio: np.ndarray, first: int, n: int, period: int) -> np.ndarray:
        """The full-resolution map (32, n, 161) of frames ``first .. first + n``; with a period
        shorter than that, only one period (and its edges) is computed."""
        m = min(n, period + 2 * EDGE)
        block = self._chunked("full", _frames(audio, first, m), EDGE, 1)
        return _periodic(block, n, EDGE, period, axis=1)

    def _window_maps(self, audio: np.ndarray, starts: list[int], period: int) -> np.ndarray:
        """(windows, 32, 225, 40): each window's map after the second pooling: the steps of
        one map of the frames they span, each window's EDGE_STEPS end steps recomputed
        from its own end frames (its zero padding, through both parts)."""
        first = starts[0] * FRAMES_PER_S
        full = self._full_map(audio, first, starts[-1] * FRAMES_PER_S + WINDOW_FRAMES - first, period)
        steps = self._chunked("mid", full, STEP, STEP)  # a step needs MID_EDGE (< STEP) frames either side
        own = [_frames(audio, s * FRAMES_PER_S, WINDOW_FRAMES) for s in starts]
        ends = self._run("full", np.stack([e for f in own for e in (f[: 2 * EDGE], f[-2 * EDGE :])]))
        slabs = []
        for k, s in enumerate(starts):
            o = s * FRAMES_PER_S - first
            head, tail = (
                full[:, o : o + MID_SLAB].copy(),
                full[:, o + WINDOW_FRAMES - MID_SLAB : o + WINDOW_FRAMES].copy(),
            )
            head[:, :EDGE], tail[:, -EDGE:] = ends[2 * k, :, :EDGE], ends[2 * k + 1, :, -EDGE:]
            slabs += [head, tail]
        fixed = self._run("mid", np.stack(slabs))
        maps = np.empty((len(starts), steps.shape[0], WINDOW_STEPS, steps.shape[2]), np.float32)
        for k, s in enumerate(starts):
            o = (s * FRAMES_PER_S - first) // STEP
            maps[k] = steps[:, o : o + WINDOW_STEPS]
            maps[k, :, :EDGE_STEPS] = fixed[2 * k, :, :EDGE_STEPS]
            maps[k, :, -EDGE_STEPS:] = fixed[2 * k + 1, :, -EDGE_STEPS:]
        return maps

    # -- P.808 ---------------------------------------------------------------------
    def _p808_features(self, audio: np.ndarray, starts: list[int], period: int) -> np.ndarray:
        """(windows, 900, 120): what speechmos's ``audio_melspec`` makes of each window, from
        one STFT of the frames they span (one period of them when that is shorter); each
        window's first and last frame (centred on its edges, so partly its zero padding)
        from its own samples."""
        a = starts[0] * SAMPLE_RATE
        n = (starts[-1] - starts[0]) * FRAMES_PER_S + WINDOW_FRAMES
        m = min(n, period + 3)  # frame 0 and the last see the slice's ends: 1 .. period + 1 are one period
        whole = _periodic(_mel(audio[a : a + (m - 1) * HOP + 1]), n, 1, period, axis=1)
        feats = []
        for s in starts:
            seg = audio[s * SAMPLE_RATE : s * SAMPLE_RATE + P808_SAMPLES]
            o = (s - starts[0]) * FRAMES_PER_S
            mel = whole[:, o : o + WINDOW_FRAMES].copy()
            mel[:, 0] = _mel(seg[: 2 * HOP])[:, 0]
            mel[:, -1] = _mel(seg[-3 * HOP :])[:, -1]
            feats.append(((spectral.power_to_db(mel) + 40) / 40).T)
        return np.stack(feats).astype(np.float32)

    # -- clips ----------------------------------------------------------------------------
    def _clip(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Raw P.835 outputs (windows, 3), P.808 scores and weights of one clip's distinct
        windows, MAX_WINDOWS windows at a time."""
        audio, starts = windows(x)
        distinct, count = distinct_windows(len(x), starts)
        period = period_frames(len(x))
        p835, p808 = [], []
        for i in range(0, len(distinct), MAX_WINDOWS):
            group = distinct[i : i + MAX_WINDOWS]
            p835.append(self._run("back", self._window_maps(audio, group, period)))
            feats = self._p808_features(audio, group, period)  # P.808 one window at a time: 5-7 % less CPU
            p808 += [self._run("p808", feats[k : k + 1])[:, 0] for k in range(len(group))]
        return np.concatenate(p835), np.concatenate(p808), np.asarray(count, dtype=np.float64)

    def __call__(self, clips: list[np.ndarray]) -> list[dict[str, float]]:
        from speechmos.dnsmos import DNSMOS

        xs = [np.asarray(x, dtype=np.float32) for x in clips]
        if any(len(x) == 0 for x in xs):
            raise ValueError("DNSMOS of an empty clip")
        scored = list(self.pool.map(self._clip, xs)) if self.pool else [self._clip(x) for x in xs]
        out = []
        for p835, p808, weight in scored:
            sig, bak, ovr = DNSMOS.get_polyfit_val(None, p835[:, 0], p835[:, 1], p835[:, 2], self.personalized)
            out.append(
                {
                    k: float(np.average(v, weights=weight))
                    for k, v in (("sig", sig), ("bak", bak), ("ovrl", ovr), ("p808", p808))
                }
            )
        return out
