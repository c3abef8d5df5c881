"""Per-segment arrays of a shard job: kept in scratch while it runs, placed when the shard is done.

A stage names the kinds of arrays it writes per segment (:class:`Kind`: a numpy
dtype, or ``wav`` for 16 kHz 16-bit audio). While the job runs, an accepted
segment's arrays wait in the job's scratch directory (``<root>/<kind>/<stem>.npy``
or ``.wav``): Snakemake empties a directory output before it reruns the job, so
the outputs cannot hold them. A segment counts as done only when every array of
it loads (:meth:`Scratch.complete`; a truncated file does not). When the shard is
done, :meth:`Scratch.place` moves them into their output directories in one of
the layouts of ``tts.layout`` (``docs/outputs.md``):

* ``files``: one file per segment, ``<dir>/<stem>.npy`` (``.wav``);
* ``packed``: one file per kind, ``<dir>/packed.npy`` (``packed.wav``), every
  segment's array end to end, the line naming its slice ``<file>#<offset>:<length>``;

and :meth:`Scratch.stack` writes a kind as one ``(N, width)`` array in line order.
:meth:`Scratch.placing` places one line at a time (the lines to come named first): a job
that writes its lines as it places them holds one line's arrays, not the shard's.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..io.audio import SAMPLE_RATE
from ..io.jsonio import atomic_open
from ..io.npyio import PACKED, check_layout, load_npy, load_ref, parse_ref, ref, save_npy
from .names import file_stem
from .reuse import link

WAV = "wav"


@dataclass(frozen=True)
class Kind:
    """One kind of array a stage writes per segment; the output line's field of the same name
    says where it is."""

    name: str
    dtype: str  # a numpy dtype name, or "wav"

    @property
    def suffix(self) -> str:
        return ".wav" if self.dtype == WAV else ".npy"


class Scratch:
    """The arrays of a shard job in progress, under ``root/<kind>/``."""

    def __init__(self, root: str | os.PathLike, kinds: Sequence[Kind]):
        self.root = Path(root)
        self.kinds = {k.name: k for k in kinds}

    def path(self, kind: str, item_id: str) -> Path:
        return self.root / kind / f"{file_stem(item_id)}{self.kinds[kind].suffix}"

    def save(self, kind: str, item_id: str, array: np.ndarray) -> None:
        k, path = self.kinds[kind], self.path(kind, item_id)
        if k.dtype == WAV:
            import soundfile as sf

            with atomic_open(path, "wb") as f:
                sf.write(f, array, SAMPLE_RATE, format="WAV", subtype="PCM_16")
        else:
            save_npy(path, np.asarray(array, dtype=k.dtype))

    def complete(self, item_id: str) -> bool:
        """Every array of the item is there and loads (a WAV is written atomically: it is there)."""
        for k in self.kinds.values():
            path = self.path(k.name, item_id)
            if k.dtype == WAV:
                if not path.is_file():
                    return False
            elif load_npy(path, k.dtype) is None:
                return False
        return True

    def take(self, item_id: str, found: Mapping[str, Path]) -> None:
        """Bring an item's arrays kept elsewhere (kind -> a file, or a slice ``<file>#<start>:<n>``
        of a packed one) into scratch, where missing; :meth:`complete` then says whether they
        all are there."""
        for kind, where in found.items():
            dst = self.path(kind, item_id)
            if kind not in self.kinds or dst.exists():
                continue
            if parse_ref(str(where)) is None:
                if where.is_file():
                    link(where, dst)
                continue
            array = read_wav(str(where)) if self.kinds[kind].dtype == WAV else load_ref(str(where))
            if array is not None:
                self.save(kind, item_id, array)

    def place(self, lines: list[dict], dirs: Mapping[str, str | os.PathLike], layout: str) -> None:
        """Move each line's arrays into ``dirs[kind]`` (absolute paths in the lines)."""
        with self.placing(dirs, layout, [line["id"] for line in lines]) as place:
            for line in lines:
                place(line)

    @contextlib.contextmanager
    def placing(
        self, dirs: Mapping[str, str | os.PathLike], layout: str, ids: Sequence[str]
    ) -> Iterator[Callable[[dict], None]]:
        """``place(line)``, to call on the lines of ``ids`` in that order: it moves the line's
        arrays into ``dirs[kind]`` (a file each, or appended to the kind's packed file) and sets
        the line's fields to where they are. A packed file is renamed into place when the block
        ends without an error (one line's array is read at a time)."""
        check_layout(layout)
        with contextlib.ExitStack() as stack:
            put: dict[str, Callable[[str], str]] = {}
            for kind, d in dirs.items():
                out = Path(d).resolve()
                out.mkdir(parents=True, exist_ok=True)
                if layout == "files":
                    put[kind] = lambda item_id, kind=kind, out=out: self._move(kind, item_id, out)
                elif self.kinds[kind].dtype == WAV:
                    put[kind] = stack.enter_context(self._wav_packer(kind, ids, out / f"{PACKED}.wav"))
                else:
                    put[kind] = stack.enter_context(self._npy_packer(kind, ids, out / f"{PACKED}.npy"))
            order = iter(ids)

            def place(line: dict) -> None:
                if next(order, None) != line["id"]:
                    raise ValueError(f"{line['id']} placed out of the order its packed files were sized for")
                for kind, f in put.items():
                    line[kind] = f(line["id"])

            yield place

    def _move(self, kind: str, item_id: str, out: Path) -> str:
        src = self.path(kind, item_id)
        os.replace(src, out / src.name)
        return str(out / src.name)

    @contextlib.contextmanager
    def _wav_packer(self, kind: str, ids: Sequence[str], path: Path) -> Iterator[Callable[[str], str]]:
        """Every line's WAV end to end in one 16-bit file (RF64 past 4 GB)."""
        import soundfile as sf

        frames = sum(sf.info(self.path(kind, i)).frames for i in ids)
        fmt = "RF64" if 2 * frames > 2**32 - 2**16 else "WAV"
        start = [0]
        with atomic_open(path, "wb") as f, sf.SoundFile(f, "w", SAMPLE_RATE, 1, "PCM_16", format=fmt) as w:

            def put(item_id: str) -> str:
                x, _ = sf.read(self.path(kind, item_id), dtype="int16")
                w.write(x)
                start[0] += len(x)
                return ref(path, start[0] - len(x), len(x))

            yield put

    @contextlib.contextmanager
    def _npy_packer(self, kind: str, ids: Sequence[str], path: Path) -> Iterator[Callable[[str], str]]:
        """Every line's array end to end in one 1-D ``.npy`` of the kind's dtype, the bytes
        ``np.save`` writes for their concatenation."""
        dtype = np.dtype(self.kinds[kind].dtype)
        total = sum(np.load(self.path(kind, i), mmap_mode="r", allow_pickle=False).size for i in ids)
        start = [0]
        with atomic_open(path, "wb") as f:
            header = {"descr": np.lib.format.dtype_to_descr(dtype), "fortran_order": False, "shape": (total,)}
            np.lib.format.write_array_header_1_0(f, header)

            def put(item_id: str) -> str:
                a = np.asarray(np.load(self.path(kind, item_id), allow_pickle=False), dtype=dtype).reshape(-1)
                f.write(a.tobytes())
                start[0] += len(a)
                return ref(path, start[0] - len(a), len(a))

            yield put
            if start[0] != total:
                raise ValueError(f"{path}: {start[0]} of the {total} elements it was sized for were placed")

    def stack(self, kind: str, ids: Sequence[str], path: str | os.PathLike, width: int) -> None:
        """The arrays of ``ids`` as rows of one ``(len(ids), width)`` array file, in that order."""
        dtype = self.kinds[kind].dtype
        rows = [np.load(self.path(kind, i), allow_pickle=False) for i in ids]
        save_npy(path, np.stack(rows).astype(dtype) if rows else np.zeros((0, width), dtype))

    def clear(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)


def read_wav(where: str) -> np.ndarray:
    """The float32 samples a line's WAV field names: a WAV file, or a packed ``<file>#<start>:<n>``."""
    import soundfile as sf

    packed = parse_ref(where)
    if packed is None:
        return sf.read(where, dtype="float32")[0]
    path, start, n = packed
    return sf.read(path, start=start, frames=n, dtype="float32")[0]
