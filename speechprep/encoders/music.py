"""Music (or other accompaniment) under a speech segment: ``music_prob`` in 0..1.

:func:`load` gives a :class:`Detector` for the ``music`` section's settings:

* ``music.detector: signal`` (the default, built in): a measured rule on the segment's
  own spectrum, and on the file's non-speech next to it where the caller gives it.
  Music holds notes: spectral peaks that stay on one frequency for a quarter of a second
  and more, between the words and under them; a voice moves its harmonics with its pitch
  and leaves its pauses quiet. The rule reads a few such measures
  (:func:`features`) and maps them through a logistic fitted on calibration voices and
  music (bench/music/detect_accuracy.py prints the fit and the held-apart figures;
  docs/stages/music.md). It gives ``speech_prob`` too: how much of the segment is a
  moving voice, so that music alone (what VAD took for speech) can be told from
  speech over music.
* ``music.detector: onnx`` with ``music.model`` a local ``.onnx`` file: an AudioSet tagger
  a lab brings (PANNs ``Cnn14``, BEATs, AST exported to ONNX): input the waveform
  ``(batch, samples)`` float32 at ``music.model_rate`` Hz, output the clip-wise class
  probabilities ``(batch, classes)``; ``music_prob`` is output ``music.output_index``
  (AudioSet's "Music" is 137) and ``speech_prob`` output ``music.speech_index``
  (AudioSet's "Speech" is 0). Logits (any value outside 0..1) go through a sigmoid.

The music stage drops a segment (``background_music``) before any model stage where
:meth:`Assessment.dropped` says so: music with no voice (``music_only_prob`` at
``music.drop_prob`` or more), or, where nothing separates it, music over
``curate.max_music_prob``; curation drops a line whose ``music_prob`` is over
``curate.max_music_prob`` (``background_music``).
"""

from __future__ import annotations

import functools
import logging
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from ..errors import UsageError

log = logging.getLogger("speechprep.music")

RATE = 16000  # the signal rule's rate: everything is resampled to it
N_FFT = 1024  # 64 ms frames: 15.6 Hz bins, fine enough to tell a held note from a gliding harmonic
HOP = 256  # 16 ms
BAND_HZ = (100.0, 3800.0)  # under 8 kHz telephone audio's Nyquist: one rule for both bands
HOLD_S = 0.25  # a peak held this long on one bin (+-1) is a note
PEAK_DB = 6.0  # a local maximum this far over the frame's median level is a peak
PEAK_RANGE_DB = 35.0  # ... and within this of the frame's loudest bin
MIN_SECONDS = 0.2  # shorter audio gives no figure (None)


@dataclass(frozen=True)
class Assessment:
    """What the detector says of one segment."""

    music_prob: float  # music or accompaniment under (or instead of) the speech
    speech_prob: float  # a moving voice in it

    @property
    def music_only_prob(self) -> float:
        return float(self.music_prob * (1.0 - self.speech_prob))

    def dropped(self, drop_prob: float | None, max_music_prob: float | None = None) -> str | None:
        """Why the music stage drops the segment before any model stage reads it, or None:
        music with no voice (``music_only_prob`` at ``drop_prob`` or more), or, where
        nothing separates it (``max_music_prob`` given: ``curate.max_music_prob``), music
        over that limit, which curation would drop as ``background_music`` anyway."""
        if drop_prob is not None and self.music_only_prob >= drop_prob:
            return f"music with no voice: music_prob {self.music_prob:.3f}, speech_prob {self.speech_prob:.3f}"
        if max_music_prob is not None and self.music_prob > max_music_prob:
            return f"music_prob {self.music_prob:.3f} (max_music_prob {max_music_prob}), nothing to separate it"
        return None


def _resampled(audio: np.ndarray, sr: int, rate: int) -> np.ndarray:
    x = np.asarray(audio, dtype=np.float32).reshape(-1)
    if sr != rate:
        import soxr

        x = soxr.resample(x, sr, rate).astype(np.float32)
    return x


@functools.cache
def _window() -> np.ndarray:
    from ..core.spectral import hann

    return hann(N_FFT).astype(np.float32)


def power_spectrogram(x: np.ndarray) -> np.ndarray:
    """``(frames, bins)`` power of ``x`` (16 kHz) in :data:`BAND_HZ`."""
    if len(x) < N_FFT:
        x = np.pad(x, (0, N_FFT - len(x)))
    n = 1 + (len(x) - N_FFT) // HOP
    idx = np.arange(N_FFT)[None, :] + HOP * np.arange(n)[:, None]
    spec = np.abs(np.fft.rfft(x[idx] * _window(), axis=1)) ** 2
    f = np.fft.rfftfreq(N_FFT, 1.0 / RATE)
    band = (f >= BAND_HZ[0]) & (f <= BAND_HZ[1])
    return spec[:, band].astype(np.float64)


def _held_peaks(db: np.ndarray) -> np.ndarray:
    """``(frames, bins)`` bool: the bins that are a peak held :data:`HOLD_S` or longer."""
    t, k = db.shape
    med = np.median(db, axis=1, keepdims=True)
    top = db.max(axis=1, keepdims=True)
    peak = np.zeros_like(db, dtype=bool)
    peak[:, 1:-1] = (db[:, 1:-1] >= db[:, :-2]) & (db[:, 1:-1] >= db[:, 2:])
    peak &= (db >= med + PEAK_DB) & (db >= top - PEAK_RANGE_DB)
    near = peak.copy()  # a peak that drifts by one bin between frames still holds
    near[:, 1:] |= peak[:, :-1]
    near[:, :-1] |= peak[:, 1:]
    hold = max(2, int(round(HOLD_S * RATE / HOP)))
    # run length of `near` along time, per bin: a run of `hold` frames or more is a note
    held = np.zeros_like(near)
    run = np.zeros(k, dtype=np.int32)
    for i in range(t):
        run = np.where(near[i], run + 1, 0)
        done = run >= hold
        if done.any():
            held[max(0, i - hold + 1) : i + 1, done] = True  # mark the whole run so far
    return held & near


def _modulation(power: np.ndarray) -> float:
    """Share of an envelope's modulation power at 2-8 Hz (syllables) among 0.5-25 Hz."""
    if len(power) <= 8:
        return 0.0
    env = np.sqrt(power)
    m = np.abs(np.fft.rfft((env - env.mean()) * np.hanning(len(env)))) ** 2
    mf = np.fft.rfftfreq(len(env), HOP / RATE)
    wide = m[(mf >= 0.5) & (mf <= 25.0)].sum()
    return float(m[(mf >= 2.0) & (mf <= 8.0)].sum() / wide) if wide > 0 else 0.0


SILENT = {
    "floor_db": -40.0,
    "pause_held": 0.0,
    "quiet_held": 0.0,
    "floor_x_pause_held": 0.0,
    "floor_x_quiet_held": 0.0,
    "level_range": 0.0,
    "rest_range": 0.0,
}
FLOOR_DB = (-40.0, -20.0)  # floor_db's weight rises from 0 to 1 across this range


def features(audio: np.ndarray, sr: int) -> dict[str, float] | None:
    """The signal rule's measures of the segment ``audio`` itself (float32 mono at ``sr``),
    or None when it is shorter than :data:`MIN_SECONDS`. Frames are 64 ms, every 16 ms,
    in :data:`BAND_HZ`; a frame holds a note where a spectral peak stays on one bin (+-1)
    for :data:`HOLD_S` or longer.

    * ``floor_db``: the 10th-percentile frame level under the 95th (dB, -40 at most): a
      voice leaves its pauses quiet, music under it fills them (and so does noise);
    * ``pause_held``: the share of the frames 10 dB or more under the 95th percentile (the
      pauses and weak sounds) that hold a note; ``quiet_held``: the same of the quieter half
      of the frames: what fills the floor is music, not noise;
    * ``floor_x_pause_held``, ``floor_x_quiet_held``: those times the floor's height
      (``floor_db`` mapped from :data:`FLOOR_DB` to 0..1): a held note matters where the
      floor is high, a high floor matters where it holds notes;
    * ``level_range``: the 95th-percentile frame level over the 10th (dB, 60 at most), and
      ``rest_range``: the same of the power outside held notes: a voice on top of music
      moves the level, music alone moves it less.
    """
    x = _resampled(audio, sr, RATE)
    if len(x) < MIN_SECONDS * RATE:
        return None
    spec = power_spectrogram(x)
    power = spec.sum(axis=1)
    if not np.isfinite(power).all() or power.max() <= 0:
        return dict(SILENT)
    db = 10 * np.log10(spec + 1e-12)
    held = _held_peaks(db)
    frame_held = held.any(axis=1)
    level = 10 * np.log10(power + 1e-12)
    top = np.percentile(level, 95)
    pause = level <= top - 10.0
    quiet = level <= np.median(level)
    rest = 10 * np.log10((spec * ~held).sum(axis=1) + 1e-12)
    floor_db = float(max(FLOOR_DB[0], np.percentile(level, 10) - top))
    height = (floor_db - FLOOR_DB[0]) / (FLOOR_DB[1] - FLOOR_DB[0])
    pause_held = float(frame_held[pause].mean()) if pause.sum() >= 3 else 0.0
    quiet_held = float(frame_held[quiet].mean())
    return {
        "floor_db": floor_db,
        "pause_held": pause_held,
        "quiet_held": quiet_held,
        "floor_x_pause_held": float(min(1.0, height) * pause_held),
        "floor_x_quiet_held": float(min(1.0, height) * quiet_held),
        "level_range": float(min(60.0, top - np.percentile(level, 10))),
        "rest_range": float(min(60.0, np.percentile(rest, 95) - np.percentile(rest, 10))),
    }


NO_CONTEXT = {"ctx_music": 0.0, "ctx_rise": 30.0, "ctx_noted": None}
NOTED = 0.2  # the share of the non-speech's frames holding a note at which it is music for ctx_open


def context_features(pieces: Iterable[np.ndarray] | None, sr: int, segment_level_db: float | None) -> dict[str, float]:
    """The file's non-speech next to a segment (``pieces``, each on its own but those shorter
    than twice :data:`HOLD_S`, which are read end to end, at ``sr``):

    * ``ctx_music``: the share of its frames holding a note, times how loud it is (0 at 40 dB
      or more under the segment, 1 at 20 dB or less): music in the pauses;
    * ``ctx_rise``: how far the segment stands above it (dB, 0..30; 30 without any): a voice
      stands above the music around it, a note VAD took for speech does not;
    * ``ctx_noted``: the share of its frames holding a note, over :data:`NOTED` (0..1; None
      without any).
    """
    xs = [_resampled(p, sr, RATE) for p in (pieces or ())]
    # a note shows only over HOLD_S: pauses too short to hold one on their own are read together
    short = [x for x in xs if len(x) < 2 * HOLD_S * RATE]
    xs = [x for x in xs if len(x) >= 2 * HOLD_S * RATE] + ([np.concatenate(short)] if short else [])
    xs = [x for x in xs if len(x) >= N_FFT]
    if not xs or segment_level_db is None:
        return dict(NO_CONTEXT)
    specs = [power_spectrogram(x) for x in xs]
    held = np.concatenate([_held_peaks(10 * np.log10(s + 1e-12)).any(axis=1) for s in specs])
    level = 10 * np.log10(np.mean(np.concatenate([s.sum(axis=1) for s in specs])) + 1e-12) - segment_level_db
    loud = float(np.clip((level + 40.0) / 20.0, 0.0, 1.0))
    return {
        "ctx_music": float(held.mean()) * loud,
        "ctx_rise": float(np.clip(-level, 0.0, 30.0)),
        "ctx_noted": float(min(1.0, held.mean() / NOTED)),
    }


def _level_db(audio: np.ndarray, sr: int) -> float | None:
    x = _resampled(audio, sr, RATE)
    if len(x) < N_FFT:
        return None
    return float(10 * np.log10(np.mean(power_spectrogram(x).sum(axis=1)) + 1e-12))


CONTINUOUS_DB = (-22.0, -14.0)  # a floor_db this high is sound that never stops (0 to 1 across)
CONTINUOUS_S = (1.0, 2.0)  # ... in a segment this long (0 to 1 across): a held vowel is shorter


def opening(f: dict[str, float]) -> float:
    """How far a segment's own held notes count as music (0..1), from its surroundings and
    its floor: where the non-speech beside it is loud (``ctx_rise`` under 20 dB; 0 at 30)
    its notes count as far as that non-speech holds notes too (``ctx_noted``); where it is
    quiet, as far as the segment's own floor is high (``floor_db`` across
    :data:`CONTINUOUS_DB`) over a segment long enough to tell (:data:`CONTINUOUS_S`): music
    alone, or loud under a voice, sounds on between the notes, while a synthetic voice, which
    holds its harmonics as a note does, falls between its syllables (the demo's espeak-ng
    voices, cut as tightly as VAD cuts them: floors of -21 dB and lower), and a voice saying
    a letter holds one vowel for under a second (KLettres' speakers, each letter a segment of
    its own: floors up to -1 dB). Without any non-speech (None), 1."""
    if f.get("ctx_noted") is None:
        return 1.0
    room = float(np.clip((30.0 - f["ctx_rise"]) / 10.0, 0.0, 1.0))
    lo, hi = CONTINUOUS_DB
    continuous = float(np.clip((f["floor_db"] - lo) / (hi - lo), 0.0, 1.0))
    lo, hi = CONTINUOUS_S
    continuous *= float(np.clip((f["seconds"] - lo) / (hi - lo), 0.0, 1.0))
    return room * f["ctx_noted"] + (1.0 - room) * continuous


def all_features(audio: np.ndarray, sr: int, noise: Sequence[np.ndarray] | None = None) -> dict[str, float] | None:
    """:func:`features` and :func:`context_features` of one segment, its ``seconds``, and ``open_pause_held``,
    ``open_quiet_held``: ``floor_x_pause_held`` and ``floor_x_quiet_held`` times
    :func:`opening`; or None when it is too short."""
    f = features(audio, sr)
    if f is None:
        return None
    f = {**f, **context_features(noise, sr, _level_db(audio, sr)), "seconds": len(audio) / sr}
    f["ctx_open"] = opening(f)
    f["open_pause_held"] = f["floor_x_pause_held"] * f["ctx_open"]
    f["open_quiet_held"] = f["floor_x_quiet_held"] * f["ctx_open"]
    return f


def _logistic(z: float) -> float:
    return float(1.0 / (1.0 + np.exp(-np.clip(z, -50, 50))))


# The logistics' weights, (intercept, {feature: weight}) on the values :func:`all_features`
# gives: bench/music/detect_accuracy.py --fit prints them, fitted on the calibration sources
# only (tests/music/mixes.py; docs/stages/music.md).
MUSIC_WEIGHTS = (-3.84, {"open_pause_held": 4.7113, "open_quiet_held": 6.4244, "ctx_music": 4.3958})
SPEECH_WEIGHTS = (-2.149, {"ctx_rise": 0.6943, "level_range": -0.0309, "rest_range": 0.0335})


def score(weights, f: dict[str, float]) -> float:
    b, w = weights
    return b + sum(v * f[k] for k, v in w.items())


class SignalDetector:
    """The built-in rule (``music.detector: signal``)."""

    kind = "signal"

    def __init__(self, music_weights=MUSIC_WEIGHTS, speech_weights=SPEECH_WEIGHTS):
        self.music_weights = music_weights
        self.speech_weights = speech_weights

    def assess(self, audio: np.ndarray, sr: int, noise: Sequence[np.ndarray] | None = None) -> Assessment | None:
        f = all_features(audio, sr, noise)
        if f is None:
            return None
        return Assessment(_logistic(score(self.music_weights, f)), _logistic(score(self.speech_weights, f)))

    def assess_batch(self, batch, noises=None) -> list[Assessment | None]:
        noises = noises or [None] * len(batch)
        return [self.assess(a, sr, n) for (a, sr), n in zip(batch, noises, strict=True)]


def _sigmoid_if_logits(v: np.ndarray) -> np.ndarray:
    return v if (v.min() >= 0.0 and v.max() <= 1.0) else 1.0 / (1.0 + np.exp(-v))


class OnnxTagger:
    """An AudioSet-class tagger a lab brings as ONNX (``music.detector: onnx``)."""

    kind = "onnx"

    def __init__(self, path: str, output_index: int, speech_index: int | None, rate: int, threads: int = 1):
        import onnxruntime as ort

        opts = ort.SessionOptions()
        opts.intra_op_num_threads = max(1, int(threads))
        opts.inter_op_num_threads = 1
        try:
            self.session = ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])
        except Exception as e:  # onnxruntime raises its own classes for a bad file
            raise UsageError(f"music.model {path}: not an ONNX model onnxruntime can load ({e})") from e
        inputs, outputs = self.session.get_inputs(), self.session.get_outputs()
        if len(inputs) != 1:
            raise UsageError(f"music.model {path}: expected one input (the waveform), got {[i.name for i in inputs]}")
        self.input = inputs[0].name
        self.output = outputs[0].name
        classes = outputs[0].shape[-1] if outputs[0].shape else None
        for name, idx in (("music.output_index", output_index), ("music.speech_index", speech_index)):
            if idx is not None and isinstance(classes, int) and not 0 <= idx < classes:
                raise UsageError(f"music.model {path}: {name} {idx} is not one of its {classes} outputs")
        self.output_index, self.speech_index, self.rate = int(output_index), speech_index, int(rate)

    def _run(self, waves: list[np.ndarray]) -> np.ndarray:
        n = max(len(w) for w in waves)
        batch = np.zeros((len(waves), n), dtype=np.float32)
        for i, w in enumerate(waves):
            batch[i, : len(w)] = w
        out = np.asarray(self.session.run([self.output], {self.input: batch})[0], dtype=np.float64)
        if out.ndim == 3:  # frame-wise (batch, frames, classes): the clip's maximum, as PANNs' clipwise
            out = out.max(axis=1)
        if out.ndim != 2 or out.shape[1] <= self.output_index:
            raise UsageError(f"music.model: output {self.output} has shape {out.shape}, not (batch, classes)")
        return _sigmoid_if_logits(out)

    def assess(self, audio: np.ndarray, sr: int, noise=None) -> Assessment | None:
        return self.assess_batch([(audio, sr)])[0]

    def assess_batch(self, batch, noises=None) -> list[Assessment | None]:
        waves = [_resampled(a, sr, self.rate) for a, sr in batch]
        ok = [i for i, w in enumerate(waves) if len(w) >= MIN_SECONDS * self.rate]
        out: list[Assessment | None] = [None] * len(batch)
        if not ok:
            return out
        # one run per group of similar lengths: padding a short clip with a long one's silence
        # would dilute its frame-wise maximum less than its mean, but still costs compute
        for i in ok:
            p = self._run([waves[i]])[0]
            speech = float(p[self.speech_index]) if self.speech_index is not None else 0.0
            out[i] = Assessment(float(p[self.output_index]), speech)
        return out


class Detector:
    """A detector behind one interface, whichever kind ``music.detector`` names."""

    def __init__(self, impl):
        self.impl = impl
        self.kind = impl.kind

    def assess(self, audio: np.ndarray, sr: int, noise: Sequence[np.ndarray] | None = None) -> Assessment | None:
        """The :class:`Assessment` of one segment (``noise``: the file's non-speech next to
        it, each piece on its own, at ``sr``), or None for audio shorter than 0.2 s."""
        return self.impl.assess(audio, sr, noise)

    def music_prob(self, audio: np.ndarray, sr: int, noise: Sequence[np.ndarray] | None = None) -> float | None:
        a = self.assess(audio, sr, noise)
        return None if a is None else a.music_prob

    def music_only_prob(self, audio: np.ndarray, sr: int, noise: Sequence[np.ndarray] | None = None) -> float | None:
        a = self.assess(audio, sr, noise)
        return None if a is None else a.music_only_prob

    def assess_batch(self, batch: Sequence[tuple[np.ndarray, int]], noises=None) -> list[Assessment | None]:
        return self.impl.assess_batch(list(batch), noises)

    def probs(self, batch: Sequence[tuple[np.ndarray, int]], noises=None) -> list[float | None]:
        """``music_prob`` of each ``(audio, sr)`` (None where too short)."""
        return [None if a is None else a.music_prob for a in self.assess_batch(batch, noises)]


def load(params) -> Detector:
    """The detector ``params`` name (any object or mapping with the ``music`` section's keys:
    ``detector``, ``model``, ``output_index``, ``speech_index``, ``model_rate``, ``threads``)."""

    def get(key, default=None):
        if isinstance(params, dict):
            return params.get(key, default)
        return getattr(params, key, default)

    kind = get("detector", "signal") or "signal"
    if kind == "signal":
        return Detector(SignalDetector())
    if kind == "onnx":
        from ..io.modelfiles import is_local_model

        path = get("model")
        if not path or not is_local_model(str(path)):
            raise UsageError(f"music.detector onnx needs music.model, a local .onnx file (got {path!r})")
        if not os.path.isfile(os.path.expanduser(str(path))):
            raise UsageError(f"music.model {path}: no such file")
        path = os.path.expanduser(str(path))
        speech = get("speech_index", 0)
        return Detector(
            OnnxTagger(path, int(get("output_index", 137)), speech, int(get("model_rate", 32000)), get("threads", 1))
        )
    raise UsageError(f"music.detector: {kind!r} is not one of signal, onnx")
