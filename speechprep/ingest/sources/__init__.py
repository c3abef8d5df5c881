"""Readers of corpora in the layout they already have: one module per source format.

A dataset names its source by one key beside ``audio_dir`` and ``manifest``:
``kaldi``, ``common_voice``, ``lhotse``, ``lhotse_recipe`` or ``hf``. Each key is
read by the module of the same name in this package (``kaldi.py``,
``common_voice.py``, ``lhotse.py``, ``lhotse_recipe.py``, ``hf.py``), which exposes::

    def read(spec, out: Sink) -> None

``spec`` is the dataset's value for its key, as the config holds it (a path
string or a dict); relative paths in it are relative to the working directory.

The contract a reader keeps:

* **One call per source item.** Every item the source lists (a Kaldi utterance,
  a Common Voice row, a supervision, a dataset row) ends in exactly one
  ``out.line(rec)`` or ``out.reject(...)``: nothing is dropped silently, and
  one bad item never stops the reader. A reader raises only for a usage
  error of the whole source (its directory or main file missing), as
  :class:`speechprep.errors.UsageError`.
* **``rec``** is a manifest-line dict, the keys a NeMo-style manifest line may
  have (:meth:`speechprep.ingest.stage.Ingest._manifest_line`):

  - ``audio_filepath`` (str, required): an absolute path to a file every
    stage can read (soundfile/libsndfile, or a codec ffmpeg decodes); audio
    that lives inside another file is written out first;
  - ``source_id`` (str, required): the source's own id (utterance id,
    supervision id, Common Voice ``path``, dataset row id); ingest derives
    the manifest ``id`` from it and keeps it on every output line;
  - ``offset`` (float seconds, optional): where the utterance starts in the
    file; absent for a whole file;
  - ``duration`` (float seconds, optional): the utterance's length where the
    source records it (``utt2dur``, a segment, ``num_samples``); absent when
    it does not, and ingest probes the file;
  - ``text``, ``speaker``, ``gender``, ``language`` (str, optional): what the
    source gives; absent (not ``None``, not ``""``) when it gives nothing;
  - ``channel`` (int, optional): the channel of a multi-channel file the
    source names (0-based).

  Ingest feeds every ``rec`` through the same checks as a manifest line
  (``text: given|verify``, ``exclude``, duplicate ids, probing), so a reader
  does not repeat them.
* **``out.reject(source_id, path, reason, detail)``**: the item cannot be used;
  ``reason`` is a short code (``command_not_allowed``, ``no_recording``,
  ``segment_out_of_range``, ``duplicate_id``, ``bad_line``, ``bad_encoding``,
  ``missing``, ``speaker_mismatch``, ...), ``detail`` says why in a sentence
  and quotes the offending input (a wav.scp line's text, a TSV line number).
  ``path`` is the audio file where known, else the source file holding the
  item, else ``None``.
* **``out.check_files``** (bool): whether the reader checks that each audio file is
  there (a ``stat`` of each) and rejects a missing one ``missing``. Ingest sets it from
  the dataset's ``probe``: with ``probe: false`` no file is touched (10^6 ``stat`` calls
  are ~18 s here), and a missing file is rejected ``missing`` by VAD, as a manifest
  line's is.
* **``out.audio_dir``** (str): a directory of this dataset's results that ingest
  owns (``results/<ds>/audio``), where a reader writes audio that lives inside
  another file or that no stage could decode (HF bytes, shorten SPHERE) as
  FLAC at the source's rate, each file once: written atomically, left alone
  when it is already there, so a resumed or grown ingest writes nothing twice.
* **``out.only``** (a set of source ids, or ``None``): the plan's pilot's selection
  (a dataset's ``pilot_ids``: :mod:`speechprep.workflow.pilot`). Ingest keeps only the
  lines and rejects of these ids, so a reader may skip an item outside it; one whose
  work costs (audio it writes out, a file it checks) must: :func:`wanted`.
* **``out.write_audio``** (bool): ``False`` in a listing (``ingest items``: the pilot
  learns each item's id, file and seconds): the reader writes no audio, and a line
  names the file it would write (HF bytes: the path and the bytes' duration) or the
  source's own file (a shorten SPHERE file, its duration from its header).
* **Nothing from the source is executed**: a wav.scp command is parsed, never
  run; a pickle is never loaded.

:data:`READERS` maps each key to its reader, importing the module only when
the key is used (a reader's library may live in one env only).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Protocol

FORMATS = ("kaldi", "common_voice", "lhotse", "lhotse_recipe", "hf")


class Sink(Protocol):
    """Where a reader puts what it reads (see the module's docstring for the contract)."""

    audio_dir: str
    check_files: bool
    only: frozenset[str] | None
    write_audio: bool

    def line(self, rec: dict[str, Any]) -> None:
        """One usable item: a manifest-line dict with ``audio_filepath`` and ``source_id``."""

    def reject(self, source_id: str, path: str | None, reason: str, detail: str) -> None:
        """One item that cannot be used, with a reason code and a sentence saying why."""


class SinkSettings:
    """A sink's settings (:class:`Sink`'s attributes), for the sinks below."""

    def __init__(
        self,
        audio_dir: str = "",
        check_files: bool = True,
        only: frozenset[str] | None = None,
        write_audio: bool = True,
    ) -> None:
        self.audio_dir, self.check_files, self.only, self.write_audio = audio_dir, check_files, only, write_audio


class Collect(SinkSettings):
    """A :class:`Sink` that keeps everything in two lists (for tests and tools)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.lines: list[dict[str, Any]] = []
        self.rejects: list[dict[str, Any]] = []

    def line(self, rec: dict[str, Any]) -> None:
        self.lines.append(rec)

    def reject(self, source_id: str, path: str | None, reason: str, detail: str) -> None:
        self.rejects.append({"source_id": source_id, "path": path, "reason": reason, "detail": detail})

    def reasons(self) -> dict[str, str]:
        """Each rejected source id's reason."""
        return {r["source_id"]: r["reason"] for r in self.rejects}


class Count(SinkSettings):
    """A :class:`Sink` that only counts (a reader's own cost, in a benchmark)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.lines = self.rejects = 0

    def line(self, rec: dict[str, Any]) -> None:
        self.lines += 1

    def reject(self, source_id: str, path: str | None, reason: str, detail: str) -> None:
        self.rejects += 1


def wanted(out: Sink, source_id: str) -> bool:
    """Whether ``out`` takes the item ``source_id`` (every item, but outside a pilot's
    selection: ``out.only``)."""
    return out.only is None or source_id in out.only


Reader = Callable[[Any, Sink], None]


class _Readers(Mapping):
    """``READERS[key]`` is the ``read`` of ``speechprep.ingest.sources.<key>``, imported on first use."""

    def __getitem__(self, key: str) -> Reader:
        if key not in FORMATS:
            raise KeyError(key)
        return importlib.import_module(f"{__name__}.{key}").read

    def __iter__(self) -> Iterator[str]:
        return iter(FORMATS)

    def __len__(self) -> int:
        return len(FORMATS)


READERS: Mapping[str, Reader] = _Readers()


def source_key(dataset: Mapping[str, Any]) -> str | None:
    """The source-format key a dataset's config uses, or ``None`` (``audio_dir``/``manifest``)."""
    keys = [k for k in FORMATS if dataset.get(k) is not None]
    return keys[0] if keys else None


# The files of a Kaldi directory that ingest reads (its other files are not inputs).
KALDI_FILES = ("wav.scp", "segments", "text", "utt2spk", "spk2utt", "spk2gender", "utt2dur", "reco2dur", "utt2lang")


def source_files(dataset: Mapping[str, Any]) -> list[str]:
    """The files of a dataset's source that ingest reads and that are cheap to list (its
    tables and manifests, not its audio) and the pilot's selection of its ids (``pilot_ids``):
    the ingest rule's inputs, so that a changed file reruns it. A recipe's corpus directory is
    listed by nothing (its recipe reads it)."""
    key = source_key(dataset)
    spec = dataset.get(key) if key else None
    selection = [dataset["pilot_ids"]] if key and isinstance(dataset.get("pilot_ids"), str) else []
    return selection + _format_files(key, spec)


def _format_files(key: str | None, spec: Any) -> list[str]:
    import os

    if key == "kaldi":
        return [p for p in (os.path.join(spec, n) for n in KALDI_FILES) if os.path.isfile(p)]
    if key == "common_voice":
        d, split = (
            (spec, "validated") if isinstance(spec, str) else (spec.get("dir", ""), spec.get("split", "validated"))
        )
        return [
            p for p in (os.path.join(d, f"{split}.tsv"), os.path.join(d, "clip_durations.tsv")) if os.path.isfile(p)
        ]
    if key == "lhotse" and isinstance(spec, dict):
        return [str(spec[k]) for k in ("recordings", "supervisions", "cuts") if isinstance(spec.get(k), str)]
    if key == "hf" and isinstance(spec, dict) and isinstance(spec.get("path"), str) and os.path.isfile(spec["path"]):
        return [spec["path"]]
    return []
