"""An acoustic fingerprint of a segment for finding copies of one recording that went
through codecs (GSM, G.722, Opus, MP3), a resample to 8 kHz, a gain change or a
different cut: numpy (librosa's mel filters and YIN, from :mod:`speechprep.core.spectral`),
on the band an 8 kHz copy keeps (150-3700 Hz). One fixed-size row per segment
(:data:`DTYPE`), computed in the measure job from the decoded 16 kHz audio and stored per
shard (``<s>.fingerprint.npy``):

* **anchors** (for finding candidate pairs among millions): the segment's strongest
  onsets (local maxima of the spectral flux, up to :data:`ANCHORS`), each described by
  :data:`ANCHOR_BITS` sign bits of random projections (SimHash) of the log-mel patch
  from 50 ms before to 250 ms after it. An onset is a sharp event, so a copy has it
  at the same place in its speech whatever its start, level or codec; the time
  between the segment start and the onset is not in the bits, so a copy offset by
  0.1-0.5 s has the same anchors. Bands of these bits are what the duplicates job
  sorts and matches (:func:`anchor_keys`).
* **frames** (for deciding a candidate pair, :func:`compare`): for each 10 ms frame of
  the first :data:`FRAMES` (3 s from just before the first speech), 32 SimHash bits of the band-normalised log-mel
  spectrum and its slope, the pitch (YIN, 20-cent steps; 0 where quiet) and whether
  the frame is speech (within 30 dB of the loudest). Two rows are compared at the
  offsets their best-matching anchors give: the share of frame bits that agree and the
  share of voiced frames whose pitch agrees within 20 cents. A codec keeps a
  recording's pitch contour to the cent and its spectral envelope; another utterance
  of the same speaker, even of the same syllable, differs in one or the other.

Every random projection comes from SHA-256 of a fixed label (``±1`` entries), so
rows are comparable across machines and numpy versions. Calibration on real copies
of real speech: ``bench/curate/duplicates_calibration.py`` (docs/stages/curate.md, "Duplicates on real speech").
"""

from __future__ import annotations

import functools
import hashlib

import numpy as np

from ..core import spectral

VERSION = 1  # bump when a change here changes the rows (stored rows are only comparable within one)
SAMPLE_RATE = 16000
N_FFT = 512  # 32 ms
HOP = 160  # 10 ms
FMIN_HZ, FMAX_HZ = 150.0, 3700.0  # what an 8 kHz (telephone, resampled) copy still has
N_MELS = 32  # frame bits
ANCHOR_MELS = 24  # anchor patches
ACTIVE_DB = 30.0  # a frame within this of the loudest frame is speech
VOICED_DB = 20.0  # pitch is read only on frames within this of the loudest
FLOOR_DB = 60.0  # log-mel values are floored this far under the loudest frame
F0_MIN_HZ, F0_MAX_HZ = 60.0, 500.0
F0_BASE_HZ, F0_STEP_CENTS = 50.0, 20.0
ANCHORS = 8
ANCHOR_PRE, ANCHOR_POST = 5, 25  # frames before and after an onset in its patch
ANCHOR_SEPARATION = 8  # frames: onsets closer than this to a stronger one are not anchors
ANCHOR_MIN_STRENGTH = 1 / 8  # of the segment's strongest onset
ANCHOR_MIN_RISE_DB = 0.5  # and at least this mean rise per frame (dB): a steady sound has no onset
ANCHOR_BITS = 1024
FRAME_BITS = 32
FRAMES = 300  # 3 s of frames are kept for the comparison, from FRAME_LEAD before the first speech frame
FRAME_LEAD = 10

DTYPE = np.dtype(
    [
        ("n_anchors", "u1"),
        ("n_frames", "<u2"),
        ("n_active", "<u4"),  # speech frames of the whole segment
        ("frame0", "<u4"),  # the first stored frame (a little before the first speech frame)
        ("anchor_t", "<u2", (ANCHORS,)),
        ("anchor_bits", "u1", (ANCHORS, ANCHOR_BITS // 8)),
        ("frame_bits", "<u4", (FRAMES,)),
        ("f0", "u1", (FRAMES,)),
        ("active", "u1", ((FRAMES + 7) // 8,)),
    ]
)


def _signs(label: str, rows: int, cols: int) -> np.ndarray:
    """A ``(rows, cols)`` float32 matrix of ``±1`` from SHA-256 of ``label``: fixed forever."""
    need = rows * cols
    out = bytearray()
    k = 0
    while len(out) * 8 < need:
        out += hashlib.sha256(f"{label}/{k}".encode("ascii")).digest()
        k += 1
    bits = np.unpackbits(np.frombuffer(bytes(out), np.uint8))[:need]
    return (bits.astype(np.float32) * 2 - 1).reshape(rows, cols)


@functools.cache
def _tables() -> dict[str, np.ndarray]:
    mel = lambda n: spectral.mel_filters(SAMPLE_RATE, N_FFT, n, FMIN_HZ, FMAX_HZ).T
    return {
        "window": np.hanning(N_FFT).astype(np.float32),
        "mel": np.ascontiguousarray(mel(N_MELS), np.float32),
        "anchor_mel": np.ascontiguousarray(mel(ANCHOR_MELS), np.float32),
        "anchor": _signs("speechprep.fingerprint.anchor.v1", (ANCHOR_PRE + ANCHOR_POST + 1) * ANCHOR_MELS, ANCHOR_BITS),
        "frame": _signs("speechprep.fingerprint.frame.v1", 2 * N_MELS, FRAME_BITS),
    }


def _log_mels(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The log-mel spectrogram (dB, frames x bands) for the frame bits and the one for the anchors."""
    t = _tables()
    x = np.asarray(x, np.float32)
    if len(x) < N_FFT:
        x = np.pad(x, (0, N_FFT - len(x)))
    frames = np.lib.stride_tricks.sliding_window_view(x, N_FFT)[::HOP]  # whole frames only: a cut is no onset
    power = (np.abs(np.fft.rfft(frames * t["window"], axis=1)) ** 2).astype(np.float32)
    return 10 * np.log10(power @ t["mel"] + 1e-10), 10 * np.log10(power @ t["anchor_mel"] + 1e-10)


def _onsets(logmel: np.ndarray, top: float) -> np.ndarray:
    """Frames of the strongest onsets (spectral flux maxima), in time order."""
    from scipy.ndimage import maximum_filter1d, uniform_filter1d

    smooth = uniform_filter1d(np.maximum(logmel, top - FLOOR_DB), 3, axis=0)
    flux = uniform_filter1d(np.maximum(np.diff(smooth, axis=0, prepend=smooth[:1]), 0).mean(axis=1), 3)
    peak = (flux == maximum_filter1d(flux, 2 * ANCHOR_SEPARATION + 1)) & (flux > flux.max() * ANCHOR_MIN_STRENGTH)
    t = np.flatnonzero(peak & (flux >= ANCHOR_MIN_RISE_DB))
    return np.sort(t[np.argsort(-flux[t], kind="stable")][:ANCHORS])


def _pitch(x: np.ndarray, n: int, loud: np.ndarray) -> np.ndarray:
    """Quantised F0 per frame (1..255 in 20-cent steps from 50 Hz; 0 where ``loud`` is false)."""
    x = np.pad(np.asarray(x, np.float32), (0, 1024))
    f0 = spectral.yin(x, F0_MIN_HZ, F0_MAX_HZ, SAMPLE_RATE, 1024, HOP)
    f0 = np.pad(f0, (0, max(0, n - len(f0))), constant_values=F0_BASE_HZ)[:n]
    q = np.clip(np.round(np.log2(f0 / F0_BASE_HZ) * 1200 / F0_STEP_CENTS), 0, 254) + 1
    return np.where(loud, q, 0).astype(np.uint8)


def fingerprint(x: np.ndarray) -> np.ndarray | None:
    """The fingerprint row (:data:`DTYPE`, shape ``()``) of 16 kHz mono audio, or ``None``
    when it has no onset to anchor on (silence, a steady tone)."""
    if len(x) == 0 or not np.isfinite(x).all():
        return None
    tables = _tables()
    logmel, anchor_mel = _log_mels(x)
    energy = 10 * np.log10(np.sum(10 ** (logmel / 10), axis=1) + 1e-10)
    top = float(energy.max())
    active = energy > top - ACTIVE_DB
    if not active.any():
        return None
    t = _onsets(anchor_mel, top)
    if len(t) == 0:
        return None
    norm = np.maximum(logmel, top - FLOOR_DB)
    norm = norm - norm[active].mean(axis=0)
    anorm = np.maximum(anchor_mel, top - FLOOR_DB)
    anorm = anorm - anorm[active].mean(axis=0)
    padded = np.pad(anorm, ((ANCHOR_PRE, ANCHOR_POST), (0, 0)), constant_values=-ACTIVE_DB)
    patches = np.stack([padded[i : i + ANCHOR_PRE + ANCHOR_POST + 1].ravel() for i in t])
    patches -= patches.mean(axis=1, keepdims=True)
    row = np.zeros((), DTYPE)
    row["n_anchors"] = len(t)
    row["anchor_t"][: len(t)] = t
    row["anchor_bits"][: len(t)] = np.packbits(patches @ tables["anchor"] > 0, axis=1)
    first = max(0, int(np.argmax(active)) - FRAME_LEAD)
    n = min(len(norm) - first, FRAMES)
    slope = np.gradient(norm, axis=0) if len(norm) > 1 else np.zeros_like(norm)
    feats = np.concatenate([norm[first : first + n], 2 * slope[first : first + n]], axis=1)
    bits = (feats @ tables["frame"] > 0).astype(np.uint64)
    row["frame_bits"][:n] = (bits << np.arange(FRAME_BITS, dtype=np.uint64)).sum(axis=1).astype(np.uint32)
    row["f0"][:n] = _pitch(x[first * HOP : (first + n) * HOP + N_FFT], n, energy[first : first + n] > top - VOICED_DB)
    row["active"] = np.packbits(np.pad(active[first : first + n], (0, FRAMES - n)))
    row["frame0"] = first
    row["n_frames"] = n
    row["n_active"] = int(active.sum())
    return row


def unpack(raw: np.ndarray | None) -> tuple[bool, np.ndarray]:
    """``(True, row)`` from a row's bytes (uint8), ``(False, zeros)`` for ``None``: what a
    shard's array holds for a segment without a fingerprint."""
    if raw is None:
        return False, np.zeros((), DTYPE)
    if raw.nbytes != DTYPE.itemsize:
        raise ValueError(f"a fingerprint row has {DTYPE.itemsize} bytes, not {raw.nbytes} (an older version?)")
    return True, np.frombuffer(raw.tobytes(), DTYPE).reshape(()).copy()


# ----------------------------------------------------------------------------
# matching
# ----------------------------------------------------------------------------
ANCHOR_MATCH = 0.25  # anchors whose bits differ in less than this share give an offset to try
OFFSETS_TRIED = 3  # the best this many anchor offsets (each +-2 frames) are tried
MIN_OVERLAP = 0.8  # of the shorter's stored speech frames must overlap the other's at the offset
# The score (compare): 1 - 2 * (share of frame bits that differ), plus PITCH_WEIGHT x (share of
# frames voiced in both whose pitch agrees), less OVERLAP_WEIGHT x (1 - speech frames of both /
# speech frames of either), less ANCHOR_WEIGHT x (share of bits differing between the closest
# anchors), less EVIDENCE_WEIGHT / sqrt(speech frames of both). Weights chosen on real copies and
# real same-speaker pairs (bench/curate/duplicates_calibration.py; docs/stages/curate.md, "Duplicates on real speech").
PITCH_WEIGHT = 0.5
OVERLAP_WEIGHT = 0.5
ANCHOR_WEIGHT = 3.0
EVIDENCE_WEIGHT = 2.0


def anchor_keys(rows: np.ndarray, band: int, band_bits: int) -> tuple[np.ndarray, np.ndarray]:
    """The ``band``-th LSH key of every anchor of ``rows`` (bits ``band * band_bits`` onwards,
    ``band_bits`` a multiple of 8 up to 64) as uint64 ``(N, ANCHORS)``, and which of them are real anchors."""
    if band_bits % 8 or not 8 <= band_bits <= 64 or (band + 1) * band_bits > ANCHOR_BITS:
        from ..errors import UsageError

        raise UsageError(
            f"fingerprint band {band} of {band_bits} bits: bits per band are a multiple of 8 up to 64, "
            f"and bands x bits at most {ANCHOR_BITS}"
        )
    nbytes = band_bits // 8
    b = np.ascontiguousarray(rows["anchor_bits"][:, :, band * nbytes : (band + 1) * nbytes])
    keys = np.zeros(b.shape[:2], np.uint64)
    for k in range(nbytes):
        keys |= b[:, :, k].astype(np.uint64) << np.uint64(8 * k)
    valid = np.arange(ANCHORS)[None, :] < rows["n_anchors"][:, None]
    return keys, valid


ANCHOR_TABLE = np.dtype([("n_anchors", "u1"), ("anchor_bits", "u1", (ANCHORS, ANCHOR_BITS // 8))])


def anchor_table(rows: np.ndarray) -> np.ndarray:
    """The anchors of ``rows`` alone (:data:`ANCHOR_TABLE`): what :func:`anchor_keys` and
    :func:`anchor_sketches` read, 1 KB a row instead of 2.6, so each band's bytes are read
    twice as fast."""
    out = np.empty(len(rows), ANCHOR_TABLE)
    out["n_anchors"], out["anchor_bits"] = rows["n_anchors"], rows["anchor_bits"]
    return out


SKETCH_BYTES = 8  # an anchor's sketch: the 64 anchor bits after a band's key (cyclically)


def anchor_sketches(rows: np.ndarray, band: int, band_bits: int) -> np.ndarray:
    """The sketch of every anchor of ``rows`` for band ``band`` as uint64 ``(N, ANCHORS)``: the 64
    anchor bits after the band's key, wrapping round. They are projections the key does not
    use, so between two anchors that share the key they differ about as much as the anchors'
    other bits do: a copy's matched anchors in a few, two different sounds in a quarter or more
    (``fingerprint_sketch_max_diff``; docs/benchmarks/curate.md, "Duplicates at scale")."""
    start, end = (band + 1) * (band_bits // 8) % (ANCHOR_BITS // 8), ANCHOR_BITS // 8
    bits = rows["anchor_bits"]
    if start + SKETCH_BYTES <= end:
        b = np.ascontiguousarray(bits[:, :, start : start + SKETCH_BYTES])
    else:  # wrapping round
        b = np.concatenate([bits[:, :, start:], bits[:, :, : start + SKETCH_BYTES - end]], axis=2)
    return b.view("<u8")[:, :, 0]


def lsh_candidates(a: np.ndarray, b: np.ndarray, band_bits: int, bands: int, sketch_max: int) -> np.ndarray:
    """Whether each pair ``(a[k], b[k])`` is a candidate of the duplicates job's LSH: two real
    anchors sharing a band's key whose sketches (:func:`anchor_sketches`) differ in at most
    ``sketch_max`` bits (what :func:`speechprep.curate.dupsearch.lsh_bands` finds among many rows)."""
    hit = np.zeros(len(a), bool)
    for band in range(bands):
        (ka, va), (kb, vb) = anchor_keys(a, band, band_bits), anchor_keys(b, band, band_bits)
        same = (ka[:, :, None] == kb[:, None, :]) & va[:, :, None] & vb[:, None, :]
        sa, sb = anchor_sketches(a, band, band_bits), anchor_sketches(b, band, band_bits)
        hit |= (same & (_popcount(sa[:, :, None] ^ sb[:, None, :]) <= sketch_max)).any(axis=(1, 2))
    return hit


def _popcount(x: np.ndarray) -> np.ndarray:
    return np.bitwise_count(x)


def _offsets(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per pair of rows: the frame offsets (stored frame of ``a`` minus that of ``b``) that its
    :data:`OFFSETS_TRIED` closest anchor pairs give ``(P, OFFSETS_TRIED)``, which of them are
    close enough to try (:data:`ANCHOR_MATCH`), and the share of bits differing between the
    closest pair ``(P,)``."""
    ham = _popcount(a["anchor_bits"][:, :, None, :] ^ b["anchor_bits"][:, None, :, :]).sum(axis=3, dtype=np.int32)
    slot = np.arange(ANCHORS)
    real = (slot[None, :, None] < a["n_anchors"][:, None, None]) & (slot[None, None, :] < b["n_anchors"][:, None, None])
    ham = np.where(real, ham / ANCHOR_BITS, np.inf).reshape(len(a), -1)
    best = np.argsort(ham, axis=1, kind="stable")[:, :OFFSETS_TRIED]
    i, j = np.divmod(best, ANCHORS)
    ta = np.take_along_axis(a["anchor_t"].astype(np.int64), i, axis=1) - a["frame0"].astype(np.int64)[:, None]
    tb = np.take_along_axis(b["anchor_t"].astype(np.int64), j, axis=1) - b["frame0"].astype(np.int64)[:, None]
    close = np.take_along_axis(ham, best, axis=1) < ANCHOR_MATCH
    return ta - tb, close, ham.min(axis=1)


def compare_many(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """:func:`compare` of each pair ``(a[k], b[k])`` of two equally long row arrays, vectorised
    (the frames of pairs without close anchors are not looked at)."""
    out = np.zeros(len(a))
    if len(a) == 0:
        return out
    lags, close, anchor_diff = _offsets(a, b)
    sel = np.flatnonzero(close.any(axis=1))
    if len(sel):
        out[sel] = _frame_scores(a[sel], b[sel], lags[sel], close[sel], anchor_diff[sel])
    return out


def _frame_scores(a: np.ndarray, b: np.ndarray, lags: np.ndarray, close: np.ndarray, anchor_diff: np.ndarray):
    shift = np.arange(-2, 3)
    lag = (lags[:, :, None] + shift).reshape(len(a), -1)  # (P, L)
    ok_lag = np.repeat(close, len(shift), axis=1)
    i = np.arange(FRAMES)
    j = i[None, None, :] - lag[:, :, None]  # (P, L, F): b's frame facing a's frame i
    fa, fb = a["n_frames"].astype(np.int64), b["n_frames"].astype(np.int64)
    inside = (i[None, None, :] < fa[:, None, None]) & (j >= 0) & (j < fb[:, None, None])
    rows = np.arange(len(a))[:, None, None]
    jc = np.clip(j, 0, FRAMES - 1)
    act_a = np.unpackbits(a["active"], axis=1, count=FRAMES).astype(bool)
    act_b = np.unpackbits(b["active"], axis=1, count=FRAMES).astype(bool)
    ab = act_b[rows, jc] & inside
    aa = act_a[:, None, :] & inside
    m = aa & ab
    both = m.sum(axis=2)
    need = np.maximum(MIN_OVERLAP * np.minimum(act_a.sum(axis=1), act_b.sum(axis=1)), 1)[:, None]
    bits_b = np.ascontiguousarray(b["frame_bits"])[rows, jc]
    diff = np.where(m, _popcount(np.ascontiguousarray(a["frame_bits"])[:, None, :] ^ bits_b), 0).sum(axis=2)
    h = diff / (FRAME_BITS * np.maximum(both, 1))
    pa = np.ascontiguousarray(a["f0"]).astype(np.int16)[:, None, :]
    pb = np.ascontiguousarray(b["f0"]).astype(np.int16)[rows, jc]
    voiced = (pa > 0) & (pb > 0) & inside
    nv = voiced.sum(axis=2)
    agree = np.where(nv > 0, (voiced & (np.abs(pa - pb) <= 1)).sum(axis=2) / np.maximum(nv, 1), 0.0)
    iou = both / np.maximum((aa | ab).sum(axis=2), 1)
    s = (1 - 2 * h) + PITCH_WEIGHT * agree - OVERLAP_WEIGHT * (1 - iou)
    s = s - ANCHOR_WEIGHT * anchor_diff[:, None] - EVIDENCE_WEIGHT / np.sqrt(np.maximum(both, 1))
    s = np.where(ok_lag & (both >= need) & (both > 0), s, 0.0)
    return np.maximum(s.max(axis=1), 0.0)


def compare(a: np.ndarray, b: np.ndarray) -> float:
    """How alike two fingerprint rows are: about 1.3 for a recording and its codec copy,
    under 0.4 for two utterances of one speaker (the weights' comment above); 0 when no
    anchors match. Tried at the offsets the closest anchors give (+-2 frames), over the
    frames both have speech in (at least :data:`MIN_OVERLAP` of the shorter's)."""
    return float(compare_many(np.asarray(a).reshape(1), np.asarray(b).reshape(1))[0])
