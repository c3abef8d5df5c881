"""The duplicates job over a whole dataset in bounded memory: no Python object per
segment on the hot path, one LSH band in memory at a time (docs/benchmarks/curate.md,
"Duplicates at scale": 0.6 GB peak at 10^6 segments, 3.6 GB at 10^7).

* :class:`Table`: the few measurements the job needs, as numpy arrays (ids as
  fixed-width bytes per shard, the PCM sha256 as four uint64, DNSMOS OVRL, SNR,
  bandwidth, which rows have a unit MinHash or a fingerprint);
* :class:`Rows`: rows of the shards' ``.npy`` arrays by global index, each shard
  memory-mapped only while it is read, so no mapping stays resident;
* :func:`lsh_bands`: LSH candidate pairs, band by band. One pass over the rows writes
  every band's keys to a temporary file per band (a fingerprint key and its row packed
  in one uint64, beside the anchor's 64-bit sketch); each band is then read alone,
  sorted, and the pairs come from runs of equal keys (of fingerprint anchors, only
  those whose sketches differ in at most ``fingerprint_sketch_max_diff`` bits: keys
  shared by chance would otherwise grow with the square of the segments). A run of
  more than ``max_run`` rows (a key that many segments share: a common sound or a
  huge group of copies) pairs each row only with the ``max_run - 1`` rows after it in
  the run, so its cost is linear; copies in it stay connected through the chain.
  Each band's candidates are verified before the next band is read, so memory holds
  one band, never every candidate;
* :func:`search`: exact groups (equal PCM hashes; one representative each enters the
  LSH), unit-MinHash pairs verified by their Jaccard similarity, fingerprint pairs
  verified by :func:`speechprep.curate.fingerprint.compare`; groups are the
  connected components (``scipy.sparse.csgraph``) and only their members become
  :class:`~speechprep.curate.duplicates.Candidate` objects, for the keeper rule
  (:func:`~speechprep.curate.duplicates.better`); every member is then scored
  against its group's kept one, all groups' pairs read and scored in blocks.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import mmap
import os
import tempfile
import zipfile
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..errors import UsageError
from ..io.jsonio import read_jsonl
from . import fingerprint as FP
from .duplicates import Candidate, Duplicate, better

log = logging.getLogger("speechprep.curate")
# Candidate pairs verified per block of rows read (at most 2 x 8,000 rows, 42 MB, held), compared
# COMPARE_BLOCK at a time. The job's memory beyond its tables is these blocks, whatever the number of
# pairs: at 10^6 segments (bench/curate/duplicates_scale.py) blocks of 20,000 and 2,048 peaked at 579 MB,
# these at 376 MB, as fast (docs/benchmarks/curate.md, "Duplicates at scale").
VERIFY_CHUNK = 8_000


# ----------------------------------------------------------------------------
# the measurements, as arrays
# ----------------------------------------------------------------------------
@dataclass
class Table:
    ids: list[np.ndarray]  # per shard, fixed-width bytes
    offsets: np.ndarray  # int64 (shards + 1): global index of each shard's first row
    sha: np.ndarray  # uint64 (N, 4)
    quality: np.ndarray  # float64, NaN where missing
    snr: np.ndarray
    bandwidth: np.ndarray
    has_sig: np.ndarray  # bool
    has_fp: np.ndarray  # bool

    def __len__(self) -> int:
        return int(self.offsets[-1])

    def shard_of(self, i: np.ndarray | int) -> np.ndarray:
        return np.searchsorted(self.offsets, i, side="right") - 1

    def id(self, i: int) -> str:
        k = int(self.shard_of(i))
        return self.ids[k][i - self.offsets[k]].decode("utf-8")

    @functools.cached_property
    def id_digests(self) -> np.ndarray:
        """Each row's id as :class:`Seen` keeps it (computed once: 10^7 ids take seconds)."""
        return np.concatenate([Seen.of(x.tolist()) for x in self.ids] or [np.zeros(0, Seen.DTYPE)])

    @functools.cached_property
    def id_order(self) -> tuple[np.ndarray, np.ndarray]:
        """The id digests sorted, each once, and the row each stands for (sorted once a run:
        both the earlier judgements and the record written read it)."""
        ids = self.id_digests
        order = np.argsort(ids)  # unique ids: any sort gives one order
        ours = ids[order]
        first = np.concatenate([[True], ours[1:] != ours[:-1]]) if len(ours) else np.zeros(0, bool)
        return (ours, order) if first.all() else (ours[first], order[first])  # ids are unique: no copy


def _num(v) -> float:
    return float(v) if v is not None else np.nan


def _digest(h: str | None, id_: str) -> bytes:
    """32 bytes standing for a PCM hash: the hash itself, a hash of any other text, or of the id
    (no hash: equal to no other segment's)."""
    if not h:
        return hashlib.sha256(b"no pcm hash:" + id_.encode("utf-8")).digest()
    try:
        b = bytes.fromhex(h)
    except ValueError:
        b = b""
    return b if len(b) == 32 else hashlib.sha256(b"text:" + h.encode("utf-8")).digest()


def _sha_words(hexes: list[str | None], ids: list[str]) -> np.ndarray:
    raw = b"".join(_digest(h, i) for h, i in zip(hexes, ids, strict=True))
    return np.frombuffer(raw, dtype="<u8").reshape(-1, 4)


def read_table(measures: list[str], rows: list[int]) -> Table:
    """The measurements lines of every shard (``rows[k]``: how many rows shard k's arrays have)."""
    ids, offsets, cols = [], [0], {k: [] for k in ("sha", "q", "snr", "bw", "sig", "fp")}
    for path, n in zip(measures, rows, strict=True):
        sid, sha, q, snr, bw, sig, fp = [], [], [], [], [], [], []
        for line in read_jsonl(path):
            sid.append(line["id"])
            sha.append(line.get("pcm_sha256"))
            q.append(_num(line.get("dnsmos_ovrl")))
            snr.append(_num(line.get("snr_db")))
            bw.append(_num(line.get("bandwidth_hz")))
            sig.append(bool(line.get("minhash")))
            fp.append(bool(line.get("fingerprint")))
        if len(sid) != n:
            raise UsageError(f"{path} has {len(sid)} lines but its arrays have {n} rows")
        ids.append(np.array([s.encode("utf-8") for s in sid], dtype=bytes) if sid else np.zeros(0, "S1"))
        offsets.append(offsets[-1] + len(sid))
        for k, v in zip(cols, (_sha_words(sha, sid), q, snr, bw, sig, fp), strict=True):
            cols[k].append(np.asarray(v))
    cat = lambda k, dt, shape=(0,): np.concatenate(cols[k]).astype(dt) if cols[k] else np.zeros(shape, dt)
    return Table(
        ids,
        np.array(offsets, np.int64),
        cat("sha", np.uint64, (0, 4)).reshape(-1, 4),
        cat("q", np.float64),
        cat("snr", np.float64),
        cat("bw", np.float64),
        cat("sig", bool),
        cat("fp", bool),
    )


# ----------------------------------------------------------------------------
# rows of the per-shard arrays
# ----------------------------------------------------------------------------
class Rows:
    """Rows of per-shard ``.npy`` arrays (or of in-memory arrays) by global index."""

    def __init__(self, shards: list, check: Callable[[str, np.ndarray], None] | None = None):
        self.shards = shards  # paths, or arrays
        self.lengths = []
        for s in shards:
            a = self._open(s)
            if check is not None:
                check(str(s) if not isinstance(s, np.ndarray) else "<array>", a)
            self.lengths.append(len(a))
            del a
        self.offsets = np.cumsum([0, *self.lengths]).astype(np.int64)

    @staticmethod
    def _open(s, scattered: bool = False) -> np.ndarray:
        if isinstance(s, np.ndarray):
            return s
        a = np.load(s, mmap_mode="r", allow_pickle=False)
        if scattered and getattr(a, "_mmap", None) is not None and hasattr(mmap, "MADV_RANDOM"):
            # Rows read here and there: without read-ahead. With it, each 2.6 KB fingerprint row
            # read about 38 KB, and once the arrays outgrow the page cache (10^7 segments: 26 GB)
            # that evicts the rows the next candidate pairs need (bench/curate/duplicates_rows_io.py).
            a._mmap.madvise(mmap.MADV_RANDOM)
        return a

    def blocks(self) -> Iterator[tuple[int, np.ndarray]]:
        """``(first global index, rows)`` for each shard, read whole and released after."""
        for start, s in zip(self.offsets[:-1], self.shards, strict=True):
            a = self._open(s)
            yield int(start), np.array(a)
            del a

    def __call__(self, idx: np.ndarray) -> np.ndarray:
        """Rows ``idx`` (sorted global indices), copied."""
        shard = np.searchsorted(self.offsets, idx, side="right") - 1
        parts = []
        for k in np.unique(shard):
            a = self._open(self.shards[k], scattered=True)
            parts.append(np.array(a[idx[shard == k] - self.offsets[k]]))
            del a
        return np.concatenate(parts)


# ----------------------------------------------------------------------------
# LSH: band keys -> sorted runs -> candidate pairs
# ----------------------------------------------------------------------------
KeyFn = Callable[[np.ndarray, int], tuple[np.ndarray, np.ndarray]]  # (rows, band) -> keys (m, s), valid (m, s)


OWNER_BITS = 40  # a band item packs its key (up to 24 bits) above its row (up to 2^40 rows) in one uint64
PACKED_KEY_BITS = 64 - OWNER_BITS


def _pairs_of_runs(
    key_of: np.ndarray, owner: np.ndarray, n: int, max_run: int, sketch: np.ndarray | None, sketch_max: int
) -> tuple[np.ndarray, int]:
    """Pair codes of rows in runs of equal keys (items sorted by key, then row); with sketches,
    only items whose sketches differ in at most ``sketch_max`` bits pair."""
    if sketch is None:
        fresh = np.ones(len(key_of), bool)
        fresh[1:] = (key_of[1:] != key_of[:-1]) | (owner[1:] != owner[:-1])  # a row twice under one key: once
        key_of, owner = key_of[fresh], owner[fresh]
    # (with sketches a row's two anchors under one key stay two items: each has its own sketch)
    start = np.ones(len(key_of), bool)
    start[1:] = key_of[1:] != key_of[:-1]
    run = np.cumsum(start) - 1
    del start
    size = np.bincount(run) if len(run) else np.zeros(0, np.int64)
    shared = size[run] >= 2
    w, run = owner[shared].astype(np.int64), run[shared]
    sk = sketch[shared] if sketch is not None else None
    capped = int((size > max_run).sum())
    codes = []
    for d in range(1, max_run):
        same = np.flatnonzero(run[:-d] == run[d:])
        if not len(same):
            break
        a, b = w[same], w[same + d]
        if sk is not None:
            ok = (a != b) & (np.bitwise_count(sk[same] ^ sk[same + d]) <= sketch_max)
            a, b = a[ok], b[ok]
        codes.append(np.minimum(a, b) * n + np.maximum(a, b))
    return (np.unique(np.concatenate(codes)) if codes else np.zeros(0, np.int64)), capped


def run_pairs(
    keys: np.ndarray,
    owner: np.ndarray,
    n: int,
    max_run: int,
    sketch: np.ndarray | None = None,
    sketch_max: int = 64,
) -> tuple[np.ndarray, int]:
    """Pair codes ``i * n + j`` (``i < j``) of rows sharing a key (and, given ``sketch``, with
    sketches at most ``sketch_max`` bits apart), and how many runs were capped (a run of more
    than ``max_run`` items pairs each only with the ``max_run - 1`` after it)."""
    o = np.lexsort((owner, keys))
    return _pairs_of_runs(keys[o], owner[o], n, max_run, None if sketch is None else sketch[o], sketch_max)


def run_pairs_packed(
    items: np.ndarray, n: int, max_run: int, sketch: np.ndarray | None = None, sketch_max: int = 64
) -> tuple[np.ndarray, int]:
    """:func:`run_pairs` of packed items (``key << OWNER_BITS | row``); without sketches sorted
    in place (8 bytes an item)."""
    if sketch is None:
        items.sort()
    else:
        o = np.argsort(items)
        items, sketch = items[o], sketch[o]
        del o
    mask = np.uint64((1 << OWNER_BITS) - 1)
    return _pairs_of_runs(items >> np.uint64(OWNER_BITS), items & mask, n, max_run, sketch, sketch_max)


def _item_dtype(packed: bool, sketched: bool) -> np.dtype:
    fields = [("item", "<u8")] if packed else [("key", "<u8"), ("owner", "<u8")]
    return np.dtype(fields + ([("sketch", "<u8")] if sketched else []))


SketchFn = Callable[[np.ndarray, int], np.ndarray]  # (rows, band) -> sketches (m, s), beside KeyFn's keys


def lsh_bands(
    rows: Rows,
    include: np.ndarray,
    key_fn: KeyFn,
    key_bits: int,
    bands: int,
    max_run: int,
    tmp: str,
    sketch_fn: SketchFn | None = None,
    sketch_max: int = 64,
    prepare: Callable[[np.ndarray], np.ndarray] | None = None,
    digests: np.ndarray | None = None,
) -> Iterator[tuple[np.ndarray, int]]:
    """Per band, the candidate pairs (sorted codes ``i * N + j``) of the ``include``d rows and how
    many runs were capped. One pass over the rows writes every band's items to a file in ``tmp``
    (key and row packed in 8 bytes when keys have at most :data:`PACKED_KEY_BITS` bits; with
    ``sketch_fn``, each item's sketch beside it; ``prepare`` turns each block of rows into what
    both read); each band is then read, sorted and paired alone, so memory holds one band's items.
    ``digests`` (uint64, one per row), given: the same pass writes each included row's
    :func:`row_digests` there, before the first band is yielded."""
    n = len(include)
    packed = key_bits <= PACKED_KEY_BITS and n < (1 << OWNER_BITS)
    dtype = _item_dtype(packed, sketch_fn is not None)
    paths = [os.path.join(tmp, f"band{b}.bin") for b in range(bands)]
    files = [open(p, "wb") for p in paths]  # noqa: SIM115
    try:
        for start, block in rows.blocks():
            inc = include[start : start + len(block)]
            if not inc.any():
                continue
            owners = (np.flatnonzero(inc) + start).astype(np.uint64)
            if digests is not None:
                digests[owners.astype(np.int64)] = row_digests(block[inc])
            block = block[inc] if prepare is None else prepare(block[inc])
            for b, f in enumerate(files):
                keys, valid = key_fn(block, b)
                own = np.broadcast_to(owners[:, None], valid.shape)[valid]
                out = np.empty(len(own), dtype)
                if packed:
                    out["item"] = keys[valid] << np.uint64(OWNER_BITS) | own
                else:
                    out["key"], out["owner"] = keys[valid], own
                if sketch_fn is not None:
                    out["sketch"] = sketch_fn(block, b)[valid]
                out.tofile(f)
            del block
    finally:
        for f in files:
            f.close()
    for path in paths:
        items = np.fromfile(path, dtype=dtype)
        os.unlink(path)
        sk = items["sketch"] if sketch_fn is not None else None
        if packed:
            yield run_pairs_packed(items["item"], n, max_run, sk, sketch_max)
        else:
            yield run_pairs(items["key"], items["owner"].astype(np.int64), n, max_run, sk, sketch_max)
        del items, sk


def _mix(h: np.ndarray) -> np.ndarray:
    h = h ^ (h >> np.uint64(33))
    h = h * np.uint64(0xFF51AFD7ED558CCD)
    return h ^ (h >> np.uint64(33))


def row_digests(block: np.ndarray) -> np.ndarray:
    """A 64-bit digest of each row's bytes (never 0: 0 stands for no digest): each 8-byte word
    times an odd constant of its position, XORed together (a change of any one word changes
    it), then mixed. Tells a row that changed from one that did not; not a cryptographic hash.
    0.009 CPU-s per 10,000 fingerprint rows (2.6 KB each)."""
    raw = np.ascontiguousarray(block).view(np.uint8).reshape(len(block), -1)
    w = raw.shape[1] // 8
    tail = np.zeros((len(raw), 8), np.uint8)  # the last bytes of a row not a whole word
    tail[:, : raw.shape[1] - w * 8] = raw[:, w * 8 :]
    pos = np.arange(1, w + 2, dtype=np.uint64) * np.uint64(0x9E3779B97F4A7C15) | np.uint64(1)
    h = np.bitwise_xor.reduce(raw[:, : w * 8].view("<u8") * pos[:w], axis=1) ^ (tail.view("<u8")[:, 0] * pos[w])
    h = _mix(h ^ np.uint64(raw.shape[1]))
    h[h == 0] = 1
    return h


def minhash_keys(r: int) -> KeyFn:
    """Band ``b`` of a MinHash row: a 64-bit hash of its values ``b*r .. b*r+r-1``."""

    def keys(block: np.ndarray, band: int) -> tuple[np.ndarray, np.ndarray]:
        h = np.full(len(block), band + 1, np.uint64)
        for v in block[:, band * r : (band + 1) * r].T:
            h = _mix(h ^ v.astype(np.uint64))
        return h[:, None], np.ones((len(block), 1), bool)

    return keys


def fingerprint_keys(bits: int) -> KeyFn:
    return lambda block, band: FP.anchor_keys(block, band, bits)


def fingerprint_sketches(bits: int) -> SketchFn:
    return lambda block, band: FP.anchor_sketches(block, band, bits)


@functools.cache
def minhash_bands(threshold: float, num_perm: int) -> tuple[int, int]:
    """``(bands, rows)``: the banding datasketch's ``MinHashLSH`` picks for this threshold
    (equal weights on the false positive and false negative probabilities)."""
    from scipy.integrate import quad

    best, opt = np.inf, (1, 1)
    for b in range(1, num_perm + 1):
        for r in range(1, num_perm // b + 1):
            fp = quad(lambda s, r, b: 1 - (1 - s**r) ** b, 0.0, threshold, args=(r, b))[0]
            fn = quad(lambda s, r, b: (1 - s**r) ** b, threshold, 1.0, args=(r, b))[0]
            if 0.5 * fp + 0.5 * fn < best:
                best, opt = 0.5 * fp + 0.5 * fn, (b, r)
    return opt


# ----------------------------------------------------------------------------
# verification
# ----------------------------------------------------------------------------
def pair_scores(
    rows: Rows, i: np.ndarray, j: np.ndarray, score: Callable[[np.ndarray, np.ndarray], np.ndarray]
) -> np.ndarray:
    """``score(rows_i, rows_j)`` of each pair, :data:`VERIFY_CHUNK` pairs at a time (each chunk's
    rows read once, in order)."""
    out = np.zeros(len(i))
    for s in range(0, len(i), VERIFY_CHUNK):
        a, b = i[s : s + VERIFY_CHUNK], j[s : s + VERIFY_CHUNK]
        idx = np.union1d(a, b)
        got = rows(idx)
        out[s : s + VERIFY_CHUNK] = score(got[np.searchsorted(idx, a)], got[np.searchsorted(idx, b)])
    return out


def verify(
    rows: Rows, pairs: np.ndarray, n: int, score: Callable[[np.ndarray, np.ndarray], np.ndarray], threshold: float
) -> tuple[np.ndarray, np.ndarray]:
    """The pairs (codes) whose ``score(rows_i, rows_j)`` reaches ``threshold``, and their scores."""
    sc = pair_scores(rows, pairs // n, pairs % n, score)
    ok = sc >= threshold
    return pairs[ok], sc[ok]


def jaccard_rows(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (a == b).mean(axis=1)


COMPARE_BLOCK = 512  # fingerprint pairs compared at once


def fingerprint_rows(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    parts = [
        FP.compare_many(a[s : s + COMPARE_BLOCK], b[s : s + COMPARE_BLOCK]) for s in range(0, len(a), COMPARE_BLOCK)
    ]
    return np.concatenate([np.zeros(0), *parts])


def exact_edges(sha: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Edges ``(i, first of its hash)`` for every repeated PCM hash, and which rows are firsts."""
    n = len(sha)
    o = np.lexsort(sha.T[::-1])
    s = sha[o]
    start = np.ones(n, bool)
    start[1:] = (s[1:] != s[:-1]).any(axis=1)
    first = o[np.flatnonzero(start)][np.cumsum(start) - 1]
    rep = np.zeros(n, bool)
    rep[o[start]] = True
    dup = ~start
    return np.stack([o[dup], first[dup]]), rep


def tmpdir_near(path: str | None) -> tempfile.TemporaryDirectory:
    """A temporary directory beside ``path`` (the job's output), else the system's."""
    d = Path(path).resolve().parent if path else None
    if d is not None:
        d.mkdir(parents=True, exist_ok=True)
    return tempfile.TemporaryDirectory(prefix=".duplicates-", dir=d)


# ----------------------------------------------------------------------------
# the search
# ----------------------------------------------------------------------------
@dataclass(frozen=True)
class Match:
    """What makes two segments copies (the duplicates job's parameters)."""

    jaccard: float  # unit MinHash: estimated Jaccard similarity at least
    acoustic: float  # fingerprint: :func:`speechprep.curate.fingerprint.compare` at least
    fp_bits: int  # fingerprint LSH: bits per band key
    fp_bands: int  # fingerprint LSH: bands
    fp_sketch_max: int  # fingerprint LSH: most sketch bits matched anchors may differ in
    max_run: int  # a band run longer than this is paired as a chain


@dataclass(frozen=True)
class Found:
    i: int  # the dropped copy (global index)
    keep: int  # the kept one
    kind: str  # exact | acoustic | near | linked
    similarity: float


@dataclass
class Verified:
    """What the LSH searches verified, kept so that a run over a grown corpus verifies only the
    candidate pairs that touch a new or changed row: per row, the digest (:func:`row_digests`)
    of its unit MinHash row and of its fingerprint row when they were searched (0: not
    searched); per search, every candidate pair it judged (codes ``i * n + j``, ``i < j``) and
    which of them are pairs. A candidate of two unchanged rows is judged as before (the same
    rows and parameters verify the same), whether the LSH drew it then or only now."""

    sig: np.ndarray  # uint64 per row
    fp: np.ndarray  # uint64 per row
    unit_tried: np.ndarray  # int64 codes, sorted
    unit: np.ndarray  # int64 codes of the pairs among them
    acoustic_tried: np.ndarray
    acoustic: np.ndarray

    @classmethod
    def empty(cls, n: int) -> Verified:
        z = lambda: np.zeros(0, np.int64)
        return cls(np.zeros(n, np.uint64), np.zeros(n, np.uint64), z(), z(), z(), z())


def _lsh_verified(rows: Rows, use: np.ndarray, lsh: dict, score, thr, m: Match, tmp, digest0, tried0, pairs0):
    """Pairs found by the LSH (:func:`lsh_bands` with ``lsh``) and verified, band by band
    (nothing but one band's candidates and the verified pairs held); how many candidates were
    verified (a pair again in each band it shares, unless verified a duplicate already), how
    many pairs were taken from ``pairs0``; every candidate judged; and the rows' digests. A row
    whose digest equals ``digest0`` (an earlier run's) is unchanged: a candidate of two
    unchanged rows that ``tried0`` holds is not verified again (a pair when ``pairs0`` holds it)."""
    n, tried, capped, kept = len(use), 0, 0, 0
    digests = np.zeros(n, np.uint64)
    found, judged, old, known, known_ok = np.zeros(0, np.int64), [], None, None, None
    for cand, c in lsh_bands(rows, use, max_run=m.max_run, tmp=tmp, digests=digests, **lsh):
        if old is None:  # the pass that wrote the band files has filled ``digests``
            old = use & (digests == digest0) & (digest0 != 0)
            known = tried0[old[tried0 // n] & old[tried0 % n]]
            known_ok = pairs0[np.isin(pairs0, known)]
        judged.append(cand)
        cand = cand[~np.isin(cand, found)]
        again = old[cand // n] & old[cand % n] & np.isin(cand, known)
        reused = cand[again][np.isin(cand[again], known_ok)]
        ok, _ = verify(rows, cand[~again], n, score, thr)
        tried, capped, kept = tried + int((~again).sum()), capped + c, kept + len(reused)
        found = np.union1d(found, np.union1d(ok, reused))
    if capped:
        log.info("duplicates: %d band runs longer than %d were paired as chains", capped, m.max_run)
    judged_all = np.unique(np.concatenate(judged)) if judged else np.zeros(0, np.int64)
    return found, tried, kept, judged_all, digests


def _candidate_edges(
    table: Table, sigs: Rows | None, fps: Rows | None, m: Match, rep: np.ndarray, tmp: str, before: Verified
) -> tuple[np.ndarray, dict, Verified]:
    n, counts, now = len(table), {}, Verified.empty(len(table))
    use = rep & table.has_sig
    if sigs is not None and use.any():
        num_perm = sigs(np.flatnonzero(use)[:1]).shape[1]
        bands, r = minhash_bands(m.jaccard, num_perm)
        lsh = dict(key_fn=minhash_keys(r), key_bits=64, bands=bands)
        now.unit, tried, kept, now.unit_tried, now.sig = _lsh_verified(
            sigs, use, lsh, jaccard_rows, m.jaccard, m, tmp, before.sig, before.unit_tried, before.unit
        )
        counts.update(unit_candidates_verified=tried, unit_pairs=len(now.unit), unit_pairs_kept=kept)
    use = rep & table.has_fp
    if fps is not None and use.any():
        lsh = dict(
            key_fn=fingerprint_keys(m.fp_bits),
            key_bits=m.fp_bits,
            bands=m.fp_bands,
            sketch_fn=fingerprint_sketches(m.fp_bits),
            sketch_max=m.fp_sketch_max,
            prepare=FP.anchor_table,
        )
        now.acoustic, tried, kept, now.acoustic_tried, now.fp = _lsh_verified(
            fps, use, lsh, fingerprint_rows, m.acoustic, m, tmp, before.fp, before.acoustic_tried, before.acoustic
        )
        counts.update(acoustic_candidates_verified=tried, acoustic_pairs=len(now.acoustic), acoustic_pairs_kept=kept)
    codes = np.concatenate([now.unit, now.acoustic])
    return np.stack([codes // n, codes % n]), counts, now


def _groups(n: int, edges: np.ndarray) -> list[np.ndarray]:
    """Connected components of more than one row (each sorted), in order of their first row."""
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components

    if edges.shape[1] == 0:
        return []
    g = coo_matrix((np.ones(edges.shape[1], np.int8), (edges[0], edges[1])), shape=(n, n)).tocsr()
    _, label = connected_components(g, directed=False)
    size = np.bincount(label)
    members = np.flatnonzero(size[label] > 1)
    members = members[np.argsort(label[members], kind="stable")]
    cuts = np.flatnonzero(np.diff(label[members])) + 1
    return sorted(np.split(members, cuts), key=lambda g: int(g[0]))


class Seen:
    """The ids earlier runs searched, each with the run that first searched it: sorted 16-byte
    BLAKE2b digests (``S16``: 16 bytes an id at 10^7 segments, where a set of the ids as text
    took about 170 bytes and a NumPy text array 4 bytes a character), a run number beside
    each, and the digests of its unit MinHash and fingerprint rows when last searched (0: not
    searched; :class:`Verified`), written as one structured array. A record of ids and runs
    alone has no row digests; one of digests alone, or of the ids' text, is read as run 1."""

    DTYPE = np.dtype("S16")
    RECORD = np.dtype([("id", "S16"), ("run", "<u4")])
    ROWS = np.dtype([("id", "S16"), ("run", "<u4"), ("sig", "<u8"), ("fp", "<u8")])

    def __init__(
        self,
        digests: np.ndarray | None = None,
        runs: np.ndarray | None = None,
        sig: np.ndarray | None = None,
        fp: np.ndarray | None = None,
    ):
        d = digests if digests is not None else np.zeros(0, self.DTYPE)
        r = runs if runs is not None else np.ones(len(d), np.uint32)
        sig = sig if sig is not None else np.zeros(len(d), np.uint64)
        fp = fp if fp is not None else np.zeros(len(d), np.uint64)
        self.source: str | None = None  # the digest of the record read (:meth:`record_digest`)
        if not (d[1:] > d[:-1]).all():  # as written: already so
            o = np.argsort(d, kind="stable")
            d, r, sig, fp = d[o], r[o], sig[o], fp[o]
            first = np.concatenate([[True], d[1:] != d[:-1]]) if len(d) else np.zeros(0, bool)
            d, r, sig, fp = d[first], r[first], sig[first], fp[first]
        self.digests, self.runs = d, r.astype(np.uint32)
        self.sig, self.fp = sig.astype(np.uint64), fp.astype(np.uint64)

    @staticmethod
    def digest(id_: bytes) -> bytes:
        return hashlib.blake2b(id_, digest_size=16).digest()

    @classmethod
    def of(cls, ids: Iterable[bytes]) -> np.ndarray:
        return np.array([cls.digest(i) for i in ids], cls.DTYPE)

    @classmethod
    def load(cls, path: str) -> Seen:
        """The record at ``path``; a missing or unreadable one is empty."""
        from ..io.npyio import load_npy

        a = load_npy(path, ndim=1)
        if a is None:
            return cls()
        if a.dtype == cls.ROWS:
            seen = cls(np.ascontiguousarray(a["id"]), a["run"], a["sig"], a["fp"])
            seen.source = cls.record_digest(a)
            return seen
        if a.dtype == cls.RECORD:
            return cls(np.ascontiguousarray(a["id"]), a["run"])
        if a.dtype == cls.DTYPE:
            return cls(a)
        return cls(cls.of(x.encode("utf-8") for x in a.tolist())) if a.dtype.kind == "U" else cls()

    def run_of(self, id_: str) -> int | None:
        """The run that first searched ``id_``, or ``None``."""
        d = np.array([self.digest(id_.encode("utf-8"))], self.DTYPE)
        k = int(np.searchsorted(self.digests, d[0]))
        return int(self.runs[k]) if k < len(self.digests) and self.digests[k] == d[0] else None

    def __contains__(self, id_: str) -> bool:
        return self.run_of(id_) is not None

    def __len__(self) -> int:
        return len(self.digests)

    @property
    def this_run(self) -> int:
        """The number of the run searching now."""
        return int(self.runs.max()) + 1 if len(self.runs) else 1

    def verified(self, table: Table, pairs: dict[str, np.ndarray]) -> Verified:
        """What the search that wrote this record judged, on ``table``'s rows: each row's digests,
        and the candidates ``pairs`` holds (``<kind>_tried``: (k, 2) id digests, ``<kind>_ok``:
        which are pairs) between rows it holds."""
        n = len(table)
        ours, rows = table.id_order
        out = Verified.empty(n)
        at = np.minimum(np.searchsorted(self.digests, ours), max(len(self.digests) - 1, 0))
        hit = self.digests[at] == ours if len(self.digests) else np.zeros(len(ours), bool)
        out.sig[rows[hit]], out.fp[rows[hit]] = self.sig[at[hit]], self.fp[at[hit]]
        for kind in ("unit", "acoustic"):
            p, good = pairs[f"{kind}_tried"], pairs[f"{kind}_ok"]
            k = np.minimum(np.searchsorted(ours, p.reshape(-1)), max(len(ours) - 1, 0)).reshape(-1, 2)
            ok = (ours[k] == p).all(axis=1) if len(ours) else np.zeros(len(p), bool)
            i, j = rows[k[ok, 0]], rows[k[ok, 1]]
            codes = np.minimum(i, j) * n + np.maximum(i, j)
            setattr(out, f"{kind}_tried", np.unique(codes))
            setattr(out, kind, np.unique(codes[good[ok]]))
        return out

    def record(self, table: Table, now: Verified | None = None) -> np.ndarray:
        """The record with every id of ``table`` it lacks added as this run's; each row's digests
        from ``now`` (an id no longer in the table: none)."""
        ours, rows = table.id_order
        at = np.searchsorted(self.digests, ours)
        known = np.zeros(len(ours), bool)
        inside = at < len(self.digests)
        known[inside] = self.digests[at[inside]] == ours[inside]
        out = np.zeros(len(self.digests) + int((~known).sum()), self.ROWS)
        out["id"] = np.insert(self.digests, at[~known], ours[~known])  # a merge: no sort of the whole
        out["run"] = np.insert(self.runs, at[~known], self.this_run)
        if now is not None:  # where each of ours is in the merge: its place, after the new ones before it
            new = ~known
            pos = at + np.cumsum(new) - new
            out["sig"][pos], out["fp"][pos] = now.sig[rows], now.fp[rows]
        return out

    @staticmethod
    def record_digest(record: np.ndarray) -> str:
        return hashlib.blake2b(np.ascontiguousarray(record).tobytes(), digest_size=16).hexdigest()

    def save_with(self, path: str, table: Table, now: Verified | None = None) -> None:
        """:meth:`record` at ``path``."""
        from ..io.npyio import save_npy

        save_npy(path, self.record(table, now))


def save_pairs(path: str, table: Table, now: Verified, tag: str, record: np.ndarray) -> None:
    """Every candidate ``now`` judged, as id digests, which are pairs, ``tag`` (what they were
    verified with) and the digest of ``record`` (the record written after them), at ``path``."""
    from ..io.npyio import save_npz

    n, ids, arrays = len(table), table.id_digests, {}
    for kind, tried, found in (("unit", now.unit_tried, now.unit), ("acoustic", now.acoustic_tried, now.acoustic)):
        arrays[f"{kind}_tried"] = np.stack([ids[tried // n], ids[tried % n]], axis=1)
        arrays[f"{kind}_ok"] = np.isin(tried, found)
    save_npz(path, tag=np.array(tag), record=np.array(Seen.record_digest(record)), **arrays)


def _keeper(table: Table, group: np.ndarray) -> int:
    """The member of ``group`` kept: the best copy (:func:`better`)."""
    nan = lambda v: None if np.isnan(v) else float(v)
    cands = {
        int(i): Candidate(table.id(int(i)), "", nan(table.quality[i]), None, nan(table.snr[i]), nan(table.bandwidth[i]))
        for i in group
    }
    by_id = sorted(cands, key=lambda i: cands[i].id)  # the margins are not transitive: a fixed order
    k = by_id[0]
    for i in by_id[1:]:
        if better(cands[i], cands[k]):
            k = i
    return k


def _keepers(table: Table, edges: np.ndarray, groups: list[np.ndarray], seen: Seen) -> tuple[list, list[int]]:
    """The groups to describe and the member each keeps, so that what an earlier run decided
    stays: run by run (``seen``: the run that first searched each id; this run's ids are
    the last), each run's segments in a group of the edges among segments of that run or an
    earlier one are copies of the best segment of an earlier run kept in that group, and
    where there is none, of the best of their own run. A segment kept stays kept whatever
    a later segment ties it to; the first-ingested copy wins."""
    if not groups:
        return [], []
    n, members, this_run = len(table), np.concatenate(groups), seen.this_run
    run = np.zeros(n, np.uint32)
    run[members] = [seen.run_of(table.id(int(i))) or this_run for i in members]
    runs = np.unique(run[members])
    if len(runs) == 1:  # one run's segments alone: the groups as they are
        return groups, [_keeper(table, g) for g in groups]
    kept = np.zeros(n, bool)
    kept[members] = True
    out, keep = [], []
    for r in runs:
        for g in _groups(n, edges[:, (run[edges[0]] <= r) & (run[edges[1]] <= r)]):
            now, earlier = g[run[g] == r], g[(run[g] < r) & kept[g]]
            if not len(now):
                continue
            k = _keeper(table, earlier if len(earlier) else now)
            kept[now[now != k]] = False
            out.append(np.union1d(now, [k]))
            keep.append(k)
    return out, keep


def _describe(
    table: Table, sigs: Rows | None, fps: Rows | None, m: Match, groups: list[np.ndarray], keep: list[int]
) -> list[Found]:
    """Every member of each group but the one it keeps (``keep``), tied to that one, with its
    kind and similarity (scored against the kept one, all groups' pairs at once)."""
    if not groups:
        return []
    keep = np.array(keep, np.int64)
    members = np.concatenate(groups)
    keep_of = np.repeat(keep, [len(g) for g in groups])
    i, k = members[members != keep_of], keep_of[members != keep_of]
    exact = (table.sha[i] == table.sha[k]).all(axis=1)
    js, fs = np.zeros(len(i)), np.zeros(len(i))
    both = table.has_sig[i] & table.has_sig[k]
    if sigs is not None and both.any():
        js[both] = pair_scores(sigs, i[both], k[both], jaccard_rows)
    both = table.has_fp[i] & table.has_fp[k] & ~exact
    if fps is not None and both.any():
        fs[both] = pair_scores(fps, i[both], k[both], fingerprint_rows)
    out = []
    for a, b, e, j, f in zip(i.tolist(), k.tolist(), exact, js, fs, strict=True):
        if e:
            out.append(Found(a, b, "exact", 1.0))
        elif f >= m.acoustic:
            out.append(Found(a, b, "acoustic", float(f)))
        elif j >= m.jaccard:
            out.append(Found(a, b, "near", float(j)))
        else:  # a copy of a copy: tied to the kept one through the others
            out.append(Found(a, b, "linked", float(max(f, j))))
    return out


def search(
    table: Table,
    sigs: Rows | None,
    fps: Rows | None,
    m: Match,
    tmp: str,
    seen: Seen | None = None,
    before: Verified | None = None,
) -> tuple[list[Found], dict, Verified]:
    """Every segment that copies a kept one (sorted by index), counts for the log, and what this
    search verified; ``seen``: the ids earlier runs searched (what they decided stays,
    :func:`_keepers`); ``before``: what an earlier search verified, on this table's rows (pairs of
    rows unchanged since are not verified again)."""
    n = len(table)
    exact, rep = exact_edges(table.sha)
    near, counts, now = _candidate_edges(table, sigs, fps, m, rep, tmp, before or Verified.empty(n))
    edges = np.concatenate([exact, near], axis=1)
    groups = _groups(n, edges)
    found = sorted(_describe(table, sigs, fps, m, *_keepers(table, edges, groups, seen or Seen())), key=lambda f: f.i)
    counts = {"segments": n, "exact_copies": int(exact.shape[1]), **counts, "groups": len(groups)}
    return found, counts, now


def check_fingerprints(path: str, a: np.ndarray) -> None:
    if a.dtype != FP.DTYPE or a.ndim != 1:
        raise UsageError(f"{path}: not a fingerprint array of this version (rerun the measure job)")


def check_minhash(path: str, a: np.ndarray) -> None:
    if a.dtype != np.uint64 or a.ndim != 2:
        raise UsageError(f"{path}: not a uint64 (N, num_perm) MinHash array")


def match_of(p) -> Match:
    """The :class:`Match` of the duplicates job's parameters (``DuplicateParams``)."""
    return Match(
        p.near_duplicate_jaccard,
        p.acoustic_duplicate_score,
        p.fingerprint_band_bits,
        p.fingerprint_bands,
        p.fingerprint_sketch_max_diff,
        p.duplicate_max_run,
    )


VERIFIED_VERSION = 1  # bump when a change to verify() or the LSH changes what a pair is


def pairs_path(seen_file: str) -> str:
    """Where the pairs verified beside the record at ``seen_file`` are kept."""
    return str(Path(seen_file).with_suffix("")) + "_pairs.npz"


PAIR_ARRAYS = ("unit_tried", "unit_ok", "acoustic_tried", "acoustic_ok")


def load_pairs(path: str, tag: str, seen: Seen) -> dict[str, np.ndarray] | None:
    """The candidates kept at ``path`` when they were judged with ``tag`` and written before
    ``seen``'s record (its digest); else None (a missing, torn or other file, other parameters,
    or a record of another run, as after a run killed between the two writes: every pair is
    verified again)."""
    if seen.source is None:
        return None
    try:
        with np.load(path, allow_pickle=False) as z:
            if str(z["tag"]) != tag or str(z["record"]) != seen.source:
                return None
            out = {k: np.asarray(z[k]) for k in PAIR_ARRAYS}
    except (OSError, ValueError, EOFError, KeyError, zipfile.BadZipFile):
        return None
    for kind in ("unit", "acoustic"):
        t, g = out[f"{kind}_tried"], out[f"{kind}_ok"]
        if not (
            t.dtype == Seen.DTYPE and t.ndim == 2 and t.shape[1] == 2 and g.dtype == bool and g.shape == t.shape[:1]
        ):
            return None
    return out


def run_job(
    measures: list[str], minhash: list[str], fingerprints: list[str], out: list[str], m: Match, seen_file: str | None
) -> dict:
    """The duplicates job over files: per shard, one line per dropped copy in ``out``. The ids
    it searched are kept in ``seen_file`` (:class:`Seen`; NumPy, no pickle; not an output): in a
    later run a copy of one of them never replaces it, so the first-ingested copy stays kept.
    The pairs it verified are kept beside it (:func:`pairs_path`): a later run verifies only
    the candidate pairs that touch a row that is new or changed since (:class:`Verified`)."""
    from ..io.jsonio import write_jsonl

    if not len(measures) == len(minhash) == len(fingerprints) == len(out):
        raise UsageError("curate duplicates: give as many --measures, --minhash, --fingerprint and --out files")
    sigs, fps = Rows(minhash, check_minhash), Rows(fingerprints, check_fingerprints)
    if sigs.lengths != fps.lengths:
        raise UsageError("curate duplicates: a shard's MinHash and fingerprint arrays have different row counts")
    table = read_table(measures, sigs.lengths)
    seen = Seen.load(seen_file) if seen_file else Seen()
    tag = f"{VERIFIED_VERSION} {FP.VERSION} {m}"
    pairs = load_pairs(pairs_path(seen_file), tag, seen) if seen_file else None
    before = seen.verified(table, pairs) if pairs is not None else None
    with tmpdir_near(out[0] if out else None) as tmp:
        found, counts, now = search(table, sigs, fps, m, tmp, seen, before)
    per_shard: list[list[dict]] = [[] for _ in out]
    for f in found:
        per_shard[int(table.shard_of(f.i))].append(
            {"id": table.id(f.i), "duplicate_of": table.id(f.keep), "kind": f.kind, "similarity": f.similarity}
        )
    for lines, path in zip(per_shard, out, strict=True):
        write_jsonl(path, lines)
    if seen_file:  # the pairs first, naming the record written after them: read only with that one
        from ..io.npyio import save_npy

        record = seen.record(table, now)
        save_pairs(pairs_path(seen_file), table, now, tag, record)
        save_npy(seen_file, record)
    kinds = {k: sum(f.kind == k for f in found) for k in ("exact", "acoustic", "near", "linked")}
    log.info("duplicates: %s; dropped: %s", counts, kinds)
    return {"segments": len(table), **kinds, "candidates": counts}


def find_duplicates(cands: list[Candidate], p) -> list[Duplicate]:
    """Every segment that duplicates a kept one (exactly, acoustically or by units), in
    input order; ``p``: the duplicates job's parameters (``DuplicateParams``). The same
    search as the job's (:func:`search`), on arrays in memory."""
    n = len(cands)
    if n == 0:
        return []
    num_perm = next((len(c.signature) for c in cands if c.signature is not None), 1)
    sigs = np.zeros((n, num_perm), np.uint64)
    fps = np.zeros(n, FP.DTYPE)
    for i, c in enumerate(cands):
        if c.signature is not None:
            sigs[i] = c.signature
        if c.fingerprint is not None:
            fps[i] = c.fingerprint
    nan = lambda v: np.nan if v is None else float(v)
    table = Table(
        [np.array([c.id.encode("utf-8") for c in cands], dtype=bytes)],
        np.array([0, n], np.int64),
        _sha_words([c.pcm_sha256 for c in cands], [c.id for c in cands]),
        np.array([nan(c.quality) for c in cands]),
        np.array([nan(c.snr_db) for c in cands]),
        np.array([nan(c.bandwidth_hz) for c in cands]),
        np.array([c.signature is not None for c in cands]),
        np.array([c.fingerprint is not None for c in cands]),
    )
    with tmpdir_near(None) as tmp:
        found, counts, _ = search(table, Rows([sigs]), Rows([fps]), match_of(p), tmp)
    log.info("duplicates: %s", counts)
    return [Duplicate(cands[f.i].id, cands[f.keep].id, f.kind, f.similarity) for f in found]
