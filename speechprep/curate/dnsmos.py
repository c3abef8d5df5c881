"""DNSMOS P.835 (SIG, BAK, OVRL) and P.808 MOS, batched, equal to ``speechmos.dnsmos.run``.

The ONNX models ship inside the ``speechmos`` wheel (MIT) and run through
onnxruntime. What ``speechmos.dnsmos.run`` does with one clip, and so what
this module reproduces for a batch of clips:

* the clip (16 kHz) is repeated end to end (``np.append(audio, audio)``)
  until it is at least 9.01 s long;
* windows of 9.01 s start every second (``int(floor(len / sr) - 9.01) + 1``
  of them; a window cut short by float rounding is skipped, as there);
* P.835: each window's raw samples go into ``sig_bak_ovr.onnx``, whose raw
  outputs are mapped by speechmos's own polynomials
  (``DNSMOS.get_polyfit_val``, called here);
* P.808: a 120-band log-mel spectrogram of the window less its last 160
  samples (librosa, n_fft 321, hop 160, ``power_to_db(ref=max)``, then
  ``(x + 40) / 40``) goes into ``model_v8.onnx``;
* the clip's scores are the means over its windows (identical windows of a
  repeated clip are computed once: :func:`distinct_windows`).

Batching: the windows of every clip in a batch go through the models together
(P.808 and its mel spectrograms in one call). The P.835 model is a CNN whose
first four 3x3 convolutions (96 % of its work) run at the full time resolution
of its STFT frames (320 samples, hop 160): consecutive windows, one second (100
frames) apart, share all but their edges. So the frames of the whole (repeated)
clip go through those layers once, each window takes its 900 frames from that
map, and only the 4 frames at each end, where the model's zero padding meets
the window's edge, are computed from the window's own frames. The rest of the
network (max pooling, three small convolutions, the dense head) runs per window,
batched. Both halves are subgraphs of the shipped ONNX file, cut with ``onnx``
at load time, so no model file is changed or added; the result equals the
per-window model to float rounding (tests: within 1e-3 of ``speechmos.dnsmos.run``).
"""

from __future__ import annotations

import importlib.util
import logging
from pathlib import Path

import numpy as np

log = logging.getLogger("speechprep.curate")

SAMPLE_RATE = 16000
HOP = 160  # STFT hop of both models (samples)
FRAME = 320  # P.835 frame length (samples)
WINDOW_FRAMES = 900  # P.835 frames per 9.01 s window
FRAMES_PER_S = SAMPLE_RATE // HOP
# Convolutions before the first max pooling: each widens the receptive field by
# one frame each side, so a window's outer EDGE frames see its zero padding.
EDGE = 4
_FRAMES_IN = "mos_estimator_logpow/concat:0"  # (N, frames, 320): the model's own framing output
_SPLIT = "mos_estimator_logpow/conv2d_3/Relu:0"  # (N, 32, frames, 161): the last full-resolution map


def model_dir() -> Path:
    spec = importlib.util.find_spec("speechmos")
    if spec is None or spec.origin is None:
        from ..core.errors import UsageError

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


class Dnsmos:
    """Scores clips in batches: ``scorer(clips) -> [{sig, bak, ovrl, p808}]``."""

    def __init__(self, personalized: bool = False, threads: int = 1, chunk_frames: int = 1000):
        import onnx
        import onnxruntime as ort
        from onnx.utils import Extractor

        self.personalized = personalized
        self.chunk = chunk_frames
        files = model_files(personalized)

        def options(arena: bool):
            so = ort.SessionOptions()
            so.intra_op_num_threads = max(1, threads)
            so.inter_op_num_threads = 1
            # the P.835 halves see a new input shape with nearly every clip: an arena would
            # keep the largest of each (about twice the peak memory, for some 10 % of speed)
            so.enable_cpu_mem_arena = arena
            return {"sess_options": so, "providers": ["CPUExecutionProvider"]}

        full = onnx.shape_inference.infer_shapes(onnx.load(str(files["p835"])))
        ex = Extractor(full)
        front = ex.extract_model([_FRAMES_IN], [_SPLIT])
        back = ex.extract_model([_SPLIT], [o.name for o in full.graph.output])
        # the front half runs on any number of frames: free the time axis
        del front.graph.value_info[:]
        front.graph.input[0].type.tensor_type.shape.dim[1].dim_param = "frames"
        front.graph.output[0].type.tensor_type.shape.dim[2].dim_param = "frames"
        self.front = ort.InferenceSession(front.SerializeToString(), **options(False))
        self.back = ort.InferenceSession(back.SerializeToString(), **options(False))
        self.p808 = ort.InferenceSession(str(files["p808"]), **options(True))
        log.info(
            "DNSMOS %s + P.808 from %s (onnxruntime %s, %d threads)",
            "personalized P.835" if personalized else "P.835",
            files["p835"].parent.parent,
            ort.__version__,
            max(1, threads),
        )

    # -- P.835 -----------------------------------------------------------------
    def _front(self, frames: np.ndarray) -> np.ndarray:
        return self.front.run(None, {_FRAMES_IN: np.ascontiguousarray(frames, dtype=np.float32)})[0]

    def _shared_map(self, audio: np.ndarray, n_frames: int) -> np.ndarray:
        """The full-resolution map (32, frames, 161) of the whole repeated clip, in
        chunks of ``self.chunk`` frames, each with EDGE frames of context either side."""
        out = []
        for a in range(0, n_frames, self.chunk):
            b = min(a + self.chunk, n_frames)
            lo, hi = max(0, a - EDGE), min(n_frames, b + EDGE)
            out.append(self._front(_frames(audio, lo, hi - lo)[None])[0][:, a - lo : b - lo])
        return np.concatenate(out, axis=1)

    def _window_maps(self, audio: np.ndarray, starts: list[int]) -> np.ndarray:
        """(windows, 32, 900, 161): each window's map, its EDGE end frames recomputed
        with the window's own zero padding."""
        last = starts[-1] * FRAMES_PER_S + WINDOW_FRAMES
        shared = self._shared_map(audio, last)
        slabs = []
        for s in starts:
            f = _frames(audio, s * FRAMES_PER_S, WINDOW_FRAMES)
            slabs += [f[: 2 * EDGE], f[-2 * EDGE :]]
        ends = self._front(np.stack(slabs))
        maps = np.empty((len(starts), *shared.shape[:1], WINDOW_FRAMES, shared.shape[2]), np.float32)
        for k, s in enumerate(starts):
            maps[k] = shared[:, s * FRAMES_PER_S : s * FRAMES_PER_S + WINDOW_FRAMES]
            maps[k, :, :EDGE] = ends[2 * k, :, :EDGE]
            maps[k, :, -EDGE:] = ends[2 * k + 1, :, -EDGE:]
        return maps

    def _p835(self, maps: np.ndarray, batch: int = 9) -> np.ndarray:
        out = [self.back.run(None, {_SPLIT: maps[i : i + batch]})[0] for i in range(0, len(maps), batch)]
        return np.concatenate(out)

    # -- P.808 ---------------------------------------------------------------------
    def _p808(self, segs: np.ndarray, batch: int = 32) -> np.ndarray:
        """P.808 MOS of windows (n, 144160), as speechmos's ``audio_melspec`` feeds it."""
        import librosa

        out = []
        for i in range(0, len(segs), batch):
            mel = librosa.feature.melspectrogram(
                y=segs[i : i + batch, :-HOP], sr=SAMPLE_RATE, n_fft=FRAME + 1, hop_length=HOP, n_mels=120
            )
            feats = np.stack([((librosa.power_to_db(m, ref=np.max) + 40) / 40).T for m in mel]).astype(np.float32)
            out.append(self.p808.run(None, {"input_1": feats})[0][:, 0])
        return np.concatenate(out)

    # -- clips ----------------------------------------------------------------------------
    def __call__(self, clips: list[np.ndarray]) -> list[dict[str, float]]:
        from speechmos.dnsmos import DNSMOS, INPUT_LENGTH, SR

        n = int(INPUT_LENGTH * SR)
        raw, segs, owner, weight = [], [], [], []
        for i, x in enumerate(clips):
            x = np.asarray(x, dtype=np.float32)
            if len(x) == 0:
                raise ValueError("DNSMOS of an empty clip")
            audio, starts = windows(x)
            distinct, count = distinct_windows(len(x), starts)
            raw.append(self._p835(self._window_maps(audio, distinct)))  # 18.5 MB a window: not kept
            segs += [audio[s * SR : s * SR + n] for s in distinct]
            owner += [i] * len(distinct)
            weight += count
        p835 = np.concatenate(raw)
        p808 = self._p808(np.stack(segs))
        sig, bak, ovr = DNSMOS.get_polyfit_val(None, p835[:, 0], p835[:, 1], p835[:, 2], self.personalized)
        owner_a, weight_a = np.asarray(owner), np.asarray(weight, dtype=np.float64)
        out = []
        for i in range(len(clips)):
            m = owner_a == i
            w = weight_a[m]
            out.append(
                {
                    k: float(np.average(v[m], weights=w))
                    for k, v in (("sig", sig), ("bak", bak), ("ovrl", ovr), ("p808", p808))
                }
            )
        return out
