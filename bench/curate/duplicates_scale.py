#!/usr/bin/env python3
"""Duplicates at scale: the ``curate duplicates`` job on fingerprints of real speech.

    SPEECHPREP_REAL_SPEECH=.cache/real_speech .venvs/curate/bin/python bench/curate/duplicates_scale.py \\
        [--sizes 100000 1000000] [--group 50] [--member-flip 0.17] [--frame-flip 0.2] [--keep DIR]

Per size, shards of 10,000 segments as the measure job writes them, made and written one at a
time (the bench holds one shard's rows and about 150 bytes per segment): measurement lines
(id, pcm_sha256, DNSMOS OVRL, SNR, bandwidth, ``minhash`` and ``fingerprint`` flags), a
uint64 ``(rows, num_perm)`` MinHash array and a fingerprint array
(:data:`speechprep.curate.fingerprint.DTYPE`).

**Fingerprints** come from real recordings (tests/real_speech.py: every klettres clip, the
LibriVox, cards, ALSA and AN4 utterances; cached in ``$SPEECHPREP_REAL_SPEECH``): their
anchors, onset times, speech masks, pitch contours and lengths are real. The background is
made of groups of ``--group`` segments: a group is one real recording's fingerprint with
every anchor XORed with one random 1024-bit word and every frame with one random 32-bit word
of its own (so groups are as unlike one another as unrelated recordings), and each member
flips a further ``--member-flip`` of the bits of those words (default 0.17: two members
then differ in 28 % of their anchor bits, the median of real same-speaker pairs in
bench/curate/duplicates_calibration.py), so a member meets
its group in the LSH as often as one speaker's utterances meet; and each frame of a member
flips ``--frame-flip`` of its bits on its own (default 0.2), as another utterance's frames
differ. XOR with one word keeps every Hamming distance between two rows under the same
words, whatever their offset, so a **planted acoustic copy** (1 % of segments) is a real
codec copy's fingerprint (GSM, G.722, Opus, MP3 or 8 kHz, +-3/6 dB, 0.1-0.5 s later,
from bench/curate/duplicates_calibration.py's copies) under its source's words (neither gets
frame-by-frame flips), and its source is that real recording under the same words: the
pair compares exactly as the real pair does. **Exact copies**
(1 %): the same row and PCM hash. **Unit near copies** (1 %): MinHash signatures are random
except these, another segment's with a quarter of its values replaced (estimated Jaccard
about 0.75). Every copy is of a random earlier segment, in any shard.

The job (:func:`speechprep.curate.stage.run_duplicates`) runs in a fresh process per
size; prints its wall time, peak RSS, the candidate pairs it verified and the
duplicates found against those planted (an acoustic copy whose real pair scores under
``acoustic_duplicate_score`` is not expected to be found). Figures: docs/benchmarks/curate.md,
"Duplicates at scale".
"""

from __future__ import annotations

import argparse
import hashlib
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from fresh_process import in_fresh_process

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from speechprep.curate import fingerprint as FP  # noqa: E402
from speechprep.curate.probe import FRAME_FLIP, GROUP, MEMBER_FLIP, flips, masked  # noqa: E402
from tests import real_speech as R  # noqa: E402

SHARD = 10_000


def pool() -> dict[str, np.ndarray]:
    """Fingerprints of real recordings (``rows``) and of real codec copies (``copy_rows``, each
    of ``copy_of`` in ``rows``, its score against it ``copy_score``), cached."""
    from duplicates_calibration import sources

    cache = R.root() / f"duplicates_scale_pool.v{FP.VERSION}.npz"
    if cache.exists():
        z = np.load(cache)
        if z["rows"].dtype == FP.DTYPE:
            return dict(z)
    utts = R.librivox() + R.cards() + R.alsa_voice() + [R.Utterance(p, "an4") for p in R.raw_utterances()]
    for lang in R.klettres_languages():
        utts += R.klettres_voices(lang)
    index, rows = {}, []
    for u in utts:
        fp = FP.fingerprint(R.read(u.path, 16000)[0])
        if fp is not None and str(u.path) not in index:
            index[str(u.path)] = len(rows)
            rows.append(fp)
    copies = R.codec_copies(sources(15), R.root() / "duplicates_calibration")
    copy_rows, copy_of = [], []
    for c in copies:
        fp = FP.fingerprint(R.read(c.path, 16000)[0])
        if fp is not None and str(c.source.path) in index:
            copy_rows.append(fp)
            copy_of.append(index[str(c.source.path)])
    out = {"rows": np.stack(rows), "copy_rows": np.stack(copy_rows), "copy_of": np.array(copy_of)}
    out["copy_score"] = np.array([FP.compare(out["rows"][i], r) for i, r in zip(copy_of, copy_rows, strict=True)])
    np.savez(cache, **out)
    return out


def make(
    root: Path, n: int, num_perm: int, group: int, member_flip: float, frame_flip: float, thr: float, seed: int = 0
) -> dict:
    """Write the shards one at a time (memory holds one shard's rows and a few arrays of ``n``);
    return what was planted. A copy's source in an earlier shard is read back from (and, for an
    acoustic copy, rewritten in) that shard's files."""
    rng = np.random.default_rng(seed)
    P = pool()
    kind = rng.random(n)
    kind[0] = 1.0
    src = (rng.random(n) * np.arange(n)).astype(np.int64)  # a random earlier segment
    base = rng.integers(0, len(P["rows"]), n // group + 1)
    pick = rng.integers(0, len(P["copy_rows"]), n)
    ovrl = rng.uniform(1.5, 3.5, n)
    # each segment's masks: one 1024-bit word XORed into every anchor, one 32-bit word into every
    # frame (the same at every slot and frame, so a copy at another offset keeps its distances);
    # kept for every segment, as a copy's source may be in any earlier shard
    amask = np.zeros((n, FP.ANCHOR_BITS // 8), np.uint8)
    fmask = np.zeros(n, np.uint32)
    pcm = np.arange(n)  # whose PCM each segment carries (an exact copy: its source's)
    planted = {"exact": 0, "acoustic": 0, "acoustic_expected": 0, "near": 0, "edges": []}
    taken = np.zeros(n, bool)  # sources of acoustic copies: their rows are replaced once
    for k, a in enumerate(range(0, n, SHARD)):
        b = min(a + SHARD, n)
        srng = np.random.default_rng([seed, 2, a])  # this shard's own draws
        rows, sigs = background(srng, P, base, amask, fmask, a, b, group, member_flip, frame_flip, seed, num_perm)
        shard = Shard(root, k, a, rows, sigs)
        for i in a + np.flatnonzero(kind[a:b] < 0.03):
            s = int(src[i])
            if kind[i] < 0.01:  # exact: the same PCM (and so the same units and fingerprint)
                pcm[i] = pcm[s]
                shard.set(i, shard.get(s))
                planted["exact"] += 1
            elif kind[i] < 0.02:  # acoustic: a real codec copy of the source's recording, under its mask
                if kind[s] < 0.03 or taken[s]:
                    continue  # its source is a planted copy or has one already: left as background
                taken[s] = True
                c = int(pick[i])
                shard.set(s, (masked(P["rows"][P["copy_of"][c]][None], amask[s][None], fmask[s][None])[0], None))
                shard.set(i, (masked(P["copy_rows"][c][None], amask[s][None], fmask[s][None])[0], None))
                planted["acoustic"] += 1
                planted["acoustic_expected"] += bool(P["copy_score"][c] >= thr)
            else:  # near: three quarters of the MinHash values shared
                sig = shard.get(s)[1].copy()
                swap = srng.choice(num_perm, num_perm // 4, replace=False)
                sig[swap] = srng.integers(0, 2**32, len(swap), dtype=np.uint64)
                shard.set(i, (None, sig))
                planted["near"] += 1
            planted["edges"].append((i, s, "exact" if kind[i] < 0.01 else "acoustic" if kind[i] < 0.02 else "near"))
        shard.write(pcm[a:b], ovrl[a:b])
    return planted


def background(srng, P, base, amask, fmask, a: int, b: int, group, member_flip, frame_flip, seed, num_perm):
    """Rows ``a..b-1`` before any copy is planted: fingerprints of their groups' real recordings
    under their masks (set here in ``amask``/``fmask``), random MinHash signatures."""
    g = np.arange(a, b) // group
    gm = np.random.default_rng([seed, 1, a])  # the group masks
    ga = flips(gm, (b // group - a // group + 1, FP.ANCHOR_BITS // 8), 0.5, np.uint8)
    gf = flips(gm, (b // group - a // group + 1,), 0.5, np.uint32)
    amask[a:b] = ga[g - a // group] ^ flips(srng, (b - a, FP.ANCHOR_BITS // 8), member_flip, np.uint8)
    fmask[a:b] = gf[g - a // group] ^ flips(srng, (b - a,), member_flip, np.uint32)
    rows = masked(P["rows"][base[g]], amask[a:b], fmask[a:b])
    rows["frame_bits"] ^= flips(srng, (b - a, FP.FRAMES), frame_flip, np.uint32)  # frame by frame
    return rows, srng.integers(0, 2**32, (b - a, num_perm), dtype=np.uint64)


class Shard:
    """The shard being made (rows from ``first``) and, behind it, the shards already written."""

    def __init__(self, root: Path, k: int, first: int, rows: np.ndarray, sigs: np.ndarray):
        self.root, self.k, self.first, self.rows, self.sigs = root, k, first, rows, sigs

    def _files(self, i: int) -> tuple[Path, Path]:
        k = i // SHARD
        return self.root / f"shard-{k:04d}.fingerprint.npy", self.root / f"shard-{k:04d}.minhash.npy"

    def get(self, i: int) -> tuple[np.ndarray, np.ndarray]:
        """Row ``i``'s fingerprint and MinHash signature (copies)."""
        if i >= self.first:
            return self.rows[i - self.first].copy(), self.sigs[i - self.first].copy()
        fp, mh = (np.load(p, mmap_mode="r") for p in self._files(i))
        return np.array(fp[i % SHARD]), np.array(mh[i % SHARD])

    def set(self, i: int, value: tuple[np.ndarray | None, np.ndarray | None]) -> None:
        """Row ``i``'s fingerprint and/or signature (``None``: kept), in memory or in its written shard."""
        if i >= self.first:
            arrays = (self.rows, self.sigs)
            at = i - self.first
        else:
            arrays = tuple(np.load(p, mmap_mode="r+") for p in self._files(i))
            at = i % SHARD
        for arr, v in zip(arrays, value, strict=True):
            if v is not None:
                arr[at] = v
        for arr in arrays:
            if isinstance(arr, np.memmap):
                arr.flush()

    def write(self, pcm: np.ndarray, ovrl: np.ndarray) -> None:
        from speechprep.io.jsonio import write_jsonl

        fp, mh = self._files(self.first)
        np.save(mh, self.sigs)
        np.save(fp, self.rows)
        write_jsonl(
            self.root / f"shard-{self.k:04d}.measures.jsonl",
            (
                {
                    "id": f"s{self.first + j:08d}",
                    "duration": 3.0,
                    "pcm_sha256": hashlib.sha256(f"pcm{pcm[j]}".encode("ascii")).hexdigest(),
                    "dnsmos_ovrl": ovrl[j],
                    "snr_db": 40.0,
                    "bandwidth_hz": 7000.0,
                    "minhash": True,
                    "fingerprint": True,
                }
                for j in range(len(self.rows))
            ),
        )


def outcome(root: Path, n: int, edges: list[tuple[int, int, str]]) -> tuple[dict, int]:
    """Per kind, how many planted copies the job put in one group with their source; and how
    many of its duplicate lines tie two segments that no planted copy ties."""
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components

    from speechprep.io.jsonio import read_jsonl

    def labels(pairs: np.ndarray) -> np.ndarray:
        g = coo_matrix((np.ones(len(pairs)), (pairs[:, 0], pairs[:, 1])), shape=(n, n))
        return connected_components(g, directed=False)[1]

    planted = labels(np.array([e[:2] for e in edges], np.int64).reshape(-1, 2))
    lines = [x for p in sorted(root.glob("shard-*.duplicates.jsonl")) for x in read_jsonl(p)]
    found = labels(np.array([(int(x["id"][1:]), int(x["duplicate_of"][1:])) for x in lines], np.int64).reshape(-1, 2))
    per_kind: dict[str, int] = {}
    for i, src, kind in edges:
        per_kind[kind] = per_kind.get(kind, 0) + int(found[i] == found[src])
    false = sum(planted[int(x["id"][1:])] != planted[int(x["duplicate_of"][1:])] for x in lines)
    return per_kind, false


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[100_000, 1_000_000])
    ap.add_argument("--group", type=int, default=GROUP)
    ap.add_argument("--member-flip", type=float, default=MEMBER_FLIP)
    ap.add_argument("--frame-flip", type=float, default=FRAME_FLIP)
    ap.add_argument("--keep", type=Path, help="write each size's shards to KEEP/<size> and keep them")
    a = ap.parse_args()
    from speechprep.curate.params import DuplicateParams
    from tests.support import config

    cfg = config()
    params = DuplicateParams.select(cfg)
    num_perm = cfg["curate"]["minhash_perm"]
    print(f"duplicates job params: {params}; {num_perm} MinHash values per segment")
    P = pool()
    print(
        f"pool: {len(P['rows'])} real recordings, {len(P['copy_rows'])} real codec copies "
        f"({np.mean(P['copy_score'] >= params['acoustic_duplicate_score']):.3f} score at the threshold)"
    )
    for n in a.sizes:
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp) if a.keep is None else a.keep / str(n)
            root.mkdir(parents=True, exist_ok=True)
            t = time.perf_counter()
            planted = make(root, n, num_perm, a.group, a.member_flip, a.frame_flip, params["acoustic_duplicate_score"])
            made = time.perf_counter() - t
            m = in_fresh_process("duplicates", root, params)
            c = m["candidates"]
            got, false = outcome(root, n, planted["edges"])
            print(
                f"{n:>10,} segments (made in {made:.0f} s): {m['seconds']:.1f} s, peak RSS {m['peak_rss_mb']:.0f} MB; "
                f"candidates verified: {c.get('acoustic_candidates_verified', 0):,} acoustic, "
                f"{c.get('unit_candidates_verified', 0):,} unit; copies found with their source: "
                f"exact {got.get('exact', 0):,} / {planted['exact']:,}, acoustic {got.get('acoustic', 0):,} / "
                f"{planted['acoustic']:,} ({planted['acoustic_expected']:,} whose real pair scores at the threshold), "
                f"near {got.get('near', 0):,} / {planted['near']:,}; {false} duplicates of segments not planted so",
                flush=True,
            )


if __name__ == "__main__":
    main()
