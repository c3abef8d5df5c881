"""Lhotse manifests: ``lhotse: {recordings: R, supervisions: S}`` or ``lhotse: {cuts: C}``.

Each file is a Lhotse JSONL manifest (``.jsonl.gz`` or ``.jsonl``), as ``RecordingSet``,
``SupervisionSet`` and ``CutSet``'s ``to_file`` and every Lhotse recipe write them. A line
is read by Lhotse's own deserialisers (``Recording.from_dict``,
``SupervisionSegment.from_dict``, ``lhotse.serialization.deserialize_item``) one at a time,
so one bad line is one reject and never stops the file (a whole-file loader would).

* A **supervision** is one utterance: its recording's file, ``offset`` (its start; plus the
  cut's start in a CutSet), ``duration``, ``text``, ``speaker``, ``gender``, ``language``
  (Lhotse's recipes write language names, ``English``: taken as ``en``, see
  :data:`LANGUAGE_CODES`) and ``source_id`` (its id). A **recording without supervisions**
  (a cut without supervisions) is one item too, a whole file (or the cut's stretch of it)
  for VAD, its duration ``num_samples / sampling_rate``: no file is opened to learn it.
* **Multi-channel**: the supervision's ``channel`` picks the file that holds it and the
  channel within that file (``channel`` on the line when the file has several); a
  supervision over every channel of one file takes the file whole (ingest mixes it down).
* **Nothing from the manifest is run or fetched**: a recording whose source is a
  ``command`` (``command_not_allowed``), a ``url`` (``source_url``) or anything but a ``file``
  (``source_unsupported``) is rejected, as is one with Lhotse ``transforms`` (speed,
  resampling: the file is not the audio the manifest means; ``lhotse_transforms``).
* Each rejected item's reason: ``bad_encoding`` (a line that is not UTF-8, a text or
  speaker UTF-8 cannot hold), ``bad_line`` (not JSON, or nothing Lhotse can read),
  ``duplicate_id`` (a supervision, recording or cut id seen before: the first is kept),
  ``no_recording`` (a supervision whose recording is not in the recordings manifest),
  ``segment_out_of_range`` (it ends after its recording), ``bad_segment`` (a negative start, no
  duration), ``bad_channel`` (a channel its recording does not have), ``missing`` (the
  audio file is not there), ``mixed_cut`` (a MixedCut: several recordings mixed, not one
  file), ``multi_file_recording`` (a recording kept in one file per channel, with no
  supervision to say which).

Paths in the manifest that are relative are taken from the working directory, as Lhotse
takes them. Ingest applies its own checks (``text: given``, ``exclude``, probing) to every
line after this.
"""

from __future__ import annotations

import gzip
import json
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from ...core.names import utf8_encodable
from ...errors import UsageError

KINDS = ("recordings", "supervisions", "cuts")
# A supervision may end this far past its recording's last sample (s) and still be in it:
# Lhotse's own recipes round a file's duration to the sample, a segment's to the ms.
END_TOLERANCE = 0.0015
# Lhotse's recipes write a language's English name; the pipeline's language checks take codes.
LANGUAGE_CODES = {
    "arabic": "ar", "catalan": "ca", "chinese": "zh", "czech": "cs", "danish": "da", "dutch": "nl",
    "english": "en", "finnish": "fi", "french": "fr", "german": "de", "greek": "el", "hindi": "hi",
    "hungarian": "hu", "italian": "it", "japanese": "ja", "korean": "ko", "mandarin": "zh",
    "norwegian": "no", "persian": "fa", "polish": "pl", "portuguese": "pt", "romanian": "ro",
    "russian": "ru", "spanish": "es", "swedish": "sv", "turkish": "tr", "ukrainian": "uk",
    "vietnamese": "vi", "welsh": "cy",
}  # fmt: skip


class Bad(Exception):
    """An item that cannot be used: its reason code and a sentence."""

    def __init__(self, reason: str, detail: str, path: str | None = None):
        super().__init__(detail)
        self.reason, self.detail, self.path = reason, detail, path


@dataclass(frozen=True)
class Audio:
    """What ingest needs of a Lhotse ``Recording``: each source's ``(type, channels,
    source)``, its duration in seconds, and whether Lhotse transforms it."""

    id: str
    sources: tuple[tuple[str, tuple[int, ...], str], ...]
    duration: float
    transforms: bool

    @classmethod
    def of(cls, r) -> Audio | Bad:
        """The recording's audio, or why it has none a stage could read (a malformed line)."""
        try:
            sources = tuple(
                (
                    s.type,
                    tuple(int(c) for c in s.channels),
                    os.path.abspath(s.source) if s.type == "file" else str(s.source),
                )
                for s in r.sources
            )  # a file's path absolute once (from the working directory, as Lhotse takes it)
            duration = r.num_samples / r.sampling_rate
        except (TypeError, ValueError, ZeroDivisionError, AttributeError) as e:
            return Bad("bad_line", f"recording {r.id!r}: no sources, samples and rate Lhotse describes: {e!r:.200}")
        if not sources or not duration > 0:
            return Bad("bad_line", f"recording {r.id!r}: {len(sources)} sources, {duration} s")
        return cls(str(r.id), sources, duration, bool(r.transforms))

    def first_path(self) -> str | None:
        for kind, _, source in self.sources:
            if kind == "file":
                return source
        return None


# -- reading manifests ----------------------------------------------------------------------
def manifest_items(path: str, kind: str) -> Iterator[tuple[str, Any]]:
    """``(where, item)`` for each line of a Lhotse JSONL manifest: ``item`` a Lhotse object of
    ``kind`` (``recordings``, ``supervisions``, ``cuts``), or a :class:`Bad` (with the line's
    ``id`` as ``where`` when it has one, else ``file:line``)."""
    from lhotse import Recording, SupervisionSegment
    from lhotse.serialization import deserialize_item

    load = {"recordings": Recording.from_dict, "supervisions": SupervisionSegment.from_dict}.get(kind, deserialize_item)
    name = os.path.basename(path)
    with (gzip.open if path.endswith(".gz") else open)(path, "rb") as f:
        for n, raw in enumerate(f, 1):
            if not raw.strip():
                continue
            where = f"{name}:{n}"
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as e:
                shown = raw[max(0, e.start - 20) : e.end + 20]
                yield where, Bad("bad_encoding", f"{where}: invalid UTF-8 byte at column {e.start + 1}: {shown!r}")
                continue
            try:
                d = json.loads(text)
            except (ValueError, RecursionError) as e:
                yield where, Bad("bad_line", f"{where}: not valid JSON: {str(e)[:200]}")
                continue
            if isinstance(d, dict) and isinstance(d.get("id"), str) and d["id"]:
                where = d["id"]
            try:
                if not isinstance(d, dict):
                    raise TypeError(f"expected a JSON object, got {type(d).__name__}")
                yield where, load(d)
            except Exception as e:  # noqa: BLE001 (a Lhotse constructor's own complaint, whatever its type)
                yield where, Bad("bad_line", f"{name} line {n}: Lhotse cannot read it as {kind}: {e!r:.300}")


def _open_spec(spec: Any) -> dict[str, str]:
    if not isinstance(spec, dict) or not spec:
        raise UsageError(f"lhotse: expected {{recordings: ..., supervisions: ...}} or {{cuts: ...}}, got {spec!r}")
    unknown = sorted(set(spec) - set(KINDS))
    if unknown:
        raise UsageError(f"lhotse: unknown key(s) {unknown}; the keys are {list(KINDS)}")
    if "cuts" in spec and len(spec) > 1:
        raise UsageError("lhotse: give either cuts, or recordings (and supervisions), not both")
    if "cuts" not in spec and "recordings" not in spec:
        raise UsageError("lhotse: a supervisions manifest needs its recordings manifest (lhotse: {recordings: ...})")
    paths = {}
    for kind, p in spec.items():
        if not isinstance(p, str) or not p:
            raise UsageError(f"lhotse.{kind}: expected a path, got {p!r}")
        if not p.endswith((".jsonl", ".jsonl.gz")):
            raise UsageError(
                f"lhotse.{kind}: {p!r} is not a .jsonl or .jsonl.gz manifest (`lhotse copy` converts others)"
            )
        path = os.path.abspath(p)
        if not os.path.isfile(path):
            raise UsageError(f"lhotse.{kind}: no such file {path!r}")
        paths[kind] = path
    return paths


def read(spec: Any, out) -> None:
    """Every supervision, and every recording (cut) without one, of the manifests ``spec`` names."""
    paths = _open_spec(spec)
    em = Emitter(out)
    if "cuts" in paths:
        for where, cut in manifest_items(paths["cuts"], "cuts"):
            em.cut(where, cut)
        return
    supervisions = manifest_items(paths["supervisions"], "supervisions") if "supervisions" in paths else ()
    em.recordings_and_supervisions(manifest_items(paths["recordings"], "recordings"), supervisions)


# -- what each item becomes -----------------------------------------------------------------
def language_code(language: str) -> str:
    return LANGUAGE_CODES.get(language.strip().lower(), language)


class Emitter:
    """Lhotse items into a Sink: each supervision, recording or cut once (ids across every
    manifest and part the emitter sees are one id space)."""

    def __init__(self, out):
        self.out = out
        self.seen: set[str] = set()
        self._exists: dict[str, bool] = {}

    def _reject(self, sid: str, e: Bad) -> None:
        self.out.reject(sid, e.path, e.reason, e.detail)

    def _first(self, sid: str, what: str, path: str | None) -> bool:
        if sid in self.seen:
            self.out.reject(sid, path, "duplicate_id", f"{what} id {sid!r} given again: the first is kept")
            return False
        self.seen.add(sid)
        return True

    def _file(self, audio: Audio, channel) -> tuple[str, int | None]:
        """The file holding ``channel`` of ``audio`` (None or every channel: the file whole),
        and the channel within it (None: the file whole, or a file of one channel)."""
        if audio.transforms:
            raise Bad("lhotse_transforms", f"recording {audio.id!r} has Lhotse transforms (speed, resampling, ...): "
                      "its file is not the audio the manifest means", audio.first_path())  # fmt: skip
        if isinstance(channel, (list, tuple)):
            channel = [int(c) for c in channel]
            channel = channel[0] if len(channel) == 1 else channel
        if channel is None or isinstance(channel, list):
            picked = [s for s in audio.sources if channel is None or sorted(s[1]) == sorted(channel)]
            if len(picked) != 1 and channel is None and len(audio.sources) > 1:
                raise Bad("multi_file_recording", f"recording {audio.id!r} is {len(audio.sources)} files, one per "
                          "channel, and no supervision names one", audio.first_path())  # fmt: skip
            if len(picked) != 1:
                raise Bad("bad_channel", f"channels {channel} are not the channels of one file of recording "
                          f"{audio.id!r} ({[list(s[1]) for s in audio.sources]})", audio.first_path())  # fmt: skip
            source, within = picked[0], None
        else:
            holding = [s for s in audio.sources if int(channel) in s[1]]
            if not holding:
                raise Bad("bad_channel", f"channel {channel} is not a channel of recording {audio.id!r} "
                          f"({sorted(c for s in audio.sources for c in s[1])})", audio.first_path())  # fmt: skip
            source = holding[0]
            within = source[1].index(int(channel)) if len(source[1]) > 1 else None
        kind, _, src = source
        if kind == "command":
            detail = f"recording {audio.id!r} is the output of a command, never run: {src[:300]!r}"
            raise Bad("command_not_allowed", detail)
        if kind == "url":
            raise Bad("source_url", f"recording {audio.id!r} is at a URL, never fetched: {src[:300]!r}")
        if kind != "file":
            raise Bad("source_unsupported", f"recording {audio.id!r} has a {kind!r} source; ingest reads files only")
        path = src
        if self.out.check_files and path not in self._exists:
            self._exists[path] = os.path.isfile(path)
        if not self._exists.get(path, True):
            raise Bad("missing", f"recording {audio.id!r}: no such file {path}", path)
        return path, within

    def _line(self, sid: str, path: str, within: int | None, fields: dict[str, Any]) -> None:
        rec: dict[str, Any] = {"audio_filepath": path, "source_id": sid}
        rec.update(fields)
        if within is not None:
            rec["channel"] = within
        for k in ("text", "speaker"):
            if k in rec and not utf8_encodable(rec[k]):
                raise Bad("bad_encoding", f"{sid!r}: its {k} holds a character UTF-8 cannot encode", path)
        self.out.line(rec)

    def supervision(self, sup, audio: Audio | Bad | None, base: float = 0.0) -> None:
        """A supervision of ``audio`` (its recording, or why it has none), ``base`` s into the file."""
        sid = str(sup.id)
        path = audio.path if isinstance(audio, Bad) else audio.first_path() if audio else None
        if not self._first(sid, "supervision", path):
            return
        try:
            if audio is None:
                raise Bad("no_recording", f"supervision {sid!r}: recording {sup.recording_id!r} is not in the manifest")
            if isinstance(audio, Bad):
                raise audio
            try:
                start, duration = base + float(sup.start), float(sup.duration)
            except (TypeError, ValueError):
                raise Bad("bad_line", f"supervision {sid!r}: start {sup.start!r}, duration {sup.duration!r}") from None
            if start < 0 or not duration > 0:
                raise Bad("bad_segment", f"supervision {sid!r}: start {start} s, duration {duration} s", path)
            if start + duration > audio.duration + END_TOLERANCE:
                end = f"ends at {start + duration:.3f} s, its recording {audio.id!r} at {audio.duration:.3f} s"
                raise Bad("segment_out_of_range", f"supervision {sid!r} {end}", path)
            file, within = self._file(audio, sup.channel)
            fields: dict[str, Any] = {"offset": round(start, 6), "duration": round(duration, 6)}
            for k in ("text", "speaker", "gender", "language"):
                v = getattr(sup, k, None)
                if isinstance(v, str) and v.strip():
                    fields[k] = language_code(v) if k == "language" else v
            self._line(sid, file, within, fields)
        except Bad as e:
            self._reject(sid, e)

    def recording(self, audio: Audio | Bad, sid: str) -> None:
        """A recording no supervision names: the whole file, for VAD."""
        try:
            if isinstance(audio, Bad):
                raise audio
            file, within = self._file(audio, None)
            self._line(sid, file, within, {"duration": round(audio.duration, 6)})
        except Bad as e:
            self._reject(sid, e)

    def recordings_and_supervisions(
        self, recordings: Iterable[tuple[str, Any]], supervisions: Iterable[tuple[str, Any]]
    ):
        """A RecordingSet and a SupervisionSet (``(where, Recording | Bad)`` items): every
        supervision, then every recording none of them named."""
        audio: dict[str, Audio | Bad] = {}
        for where, r in recordings:
            if isinstance(r, Bad):
                audio.setdefault(where, r)
                continue
            a, rid = Audio.of(r), str(r.id)
            if rid in audio:
                path = a.first_path() if isinstance(a, Audio) else None
                self.out.reject(rid, path, "duplicate_id", f"recording id {rid!r} given again: the first is kept")
                continue
            audio[rid] = a
        named: set[str] = set()
        for where, sup in supervisions:
            if isinstance(sup, Bad):
                if self._first(where, "supervision", None):
                    self._reject(where, sup)
                continue
            named.add(str(sup.recording_id))
            self.supervision(sup, audio.get(str(sup.recording_id)))
        for rid, a in audio.items():
            if rid not in named and self._first(rid, "recording", None if isinstance(a, Bad) else a.first_path()):
                self.recording(a, rid)

    def cut(self, where: str, cut) -> None:
        """A cut of a CutSet: each of its supervisions, or the cut itself when it has none."""
        from lhotse.cut import MixedCut

        if isinstance(cut, Bad):
            if self._first(where, "cut", None):
                self._reject(where, cut)
            return
        if isinstance(cut, MixedCut) or getattr(cut, "recording", None) is None:
            if self._first(str(cut.id), "cut", None):
                reason = "mixed_cut" if isinstance(cut, MixedCut) else "no_recording"
                self.out.reject(
                    str(cut.id), None, reason, f"cut {cut.id!r} is not a stretch of one recording ({reason})"
                )
            return
        audio = Audio.of(cut.recording)
        if isinstance(audio, Bad):
            for sup in cut.supervisions or [cut]:
                if self._first(str(sup.id), "cut", None):
                    self._reject(str(sup.id), audio)
            return
        if cut.supervisions:
            for sup in cut.supervisions:
                self.supervision(sup, audio, base=float(cut.start))
            return
        sid = str(cut.id)
        if not self._first(sid, "cut", audio.first_path()):
            return
        try:
            start, duration = float(cut.start), float(cut.duration)
            if start + duration > audio.duration + END_TOLERANCE:
                raise Bad("segment_out_of_range", f"cut {sid!r} ends at {start + duration:.3f} s, its recording at "
                          f"{audio.duration:.3f} s", audio.first_path())  # fmt: skip
            file, within = self._file(audio, cut.channel)
            whole = start == 0 and abs(duration - audio.duration) <= END_TOLERANCE
            fields = {"duration": round(duration, 6)}
            if not whole:
                fields["offset"] = round(start, 6)
            self._line(sid, file, within, fields)
        except Bad as e:
            self._reject(sid, e)
