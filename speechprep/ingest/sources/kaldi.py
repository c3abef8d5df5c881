"""A Kaldi data directory (``kaldi: DIR``): ``wav.scp``, ``segments``, ``text``, ``utt2spk``,
``spk2utt``, ``spk2gender``, ``utt2dur``, ``reco2dur``, ``utt2lang``.

Each file is a Kaldi table: one ``<key> <value>`` line per item, the key up to the first
whitespace, the value the rest of the line (Lhotse's ``load_kaldi_text_mapping`` splits
the same way). Lhotse's readers build a dict per file, so a duplicate key replaces the
first silently, one undecodable byte or a line without a value fails the whole file, and
``load_kaldi_data_dir`` runs ``wav.scp`` commands (through kaldi_native_io) to learn
durations; here each line is read on its own so that a bad line costs only its item, with
its reason.

* An utterance is a ``segments`` line (``<utt> <reco> <start> <end>``; ``end`` -1: to the
  file's end), else a ``wav.scp`` recording whole (VAD finds its speech).
* ``wav.scp`` values are file paths (relative ones from the working directory, as Kaldi
  resolves them from the recipe's) or commands, which are **never run**: ``sph2pipe
  [-f wav] [-p] [-c N] X.sph |``, ``flac -c -d -s X.flac |``, ``sox X -t wav - |`` and
  ``ffmpeg -i X -f wav - |`` are recognised and their file ``X`` read directly (``-c N``:
  channel N-1); any other command is rejected ``command_not_allowed`` with the line's text.
* NIST SPHERE: PCM (and mu-law) are read by libsndfile as they are; a shorten-compressed
  file (``sample_coding`` ``...shorten...``, LDC's Switchboard, Fisher, WSJ) is decoded once,
  every channel, into FLAC at its rate in ``out.audio_dir`` (:func:`decode_shorten`): by the
  ``sph2pipe`` tool called on the file where it is installed, else by ffmpeg's shorten
  decoder, fed the stream after the header through a pipe (16-bit PCM shorten; mu-law
  shorten needs sph2pipe), the decoded samples checked against the header's
  ``sample_count``. Neither tool: rejected ``no_decoder``; a stream that fails to decode or
  decodes short: ``bad_shorten``, with the tool's message. Only a recording an utterance of
  ``out.only`` is in is decoded, and none in a listing (``out.write_audio`` false: the SPHERE
  file itself, its duration from its header's ``sample_count`` and ``sample_rate``).
  tests/ingest/shorten.py writes such files from real speech for the tests.
* Durations from ``utt2dur`` (a whole recording) or the segments, checked against
  ``reco2dur`` where given (``segment_out_of_range``); absent otherwise, and ingest probes.
* Speakers from ``utt2spk`` (``spk2utt`` must agree: ``speaker_mismatch``), genders from
  ``spk2gender`` (``m``/``f`` -> ``male``/``female``), languages from ``utt2lang``.

Every key of every file ends in exactly one line or reject, except a later duplicate of an
utterance (rejected ``duplicate_id``; the first is read, as a manifest's is). An utterance
with a problem in any file is rejected with the first: ``bad_encoding``, ``bad_line``,
``duplicate_id`` (a second, different value), ``no_recording`` (a ``text``/``utt2dur``/
``utt2lang`` key, or a segment's recording, that ``wav.scp`` lacks), ``speaker_mismatch``,
``segment_out_of_range`` (one that ends before it starts, or past reco2dur), ``missing``,
``command_not_allowed``, ``no_segments`` (a recording no segment uses, when there is a
``segments`` file), ``no_decoder`` and ``bad_shorten`` (a shorten SPHERE file).
"""

from __future__ import annotations

import math
import os
import shlex
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from ...errors import UsageError
from . import Sink, wanted

if TYPE_CHECKING:
    import numpy as np

GENDERS = {"m": "male", "f": "female"}
SEGMENT_END_SLACK = 0.01  # s a segment may pass reco2dur (rounding in the source's times)
UTTERANCE_FILES = ("text", "utt2spk", "utt2dur", "utt2lang")


@dataclass
class Table:
    """One Kaldi table file, read line by line: ``values`` by key (the first value of a key
    given twice with the same value), ``problems`` by key (the first problem of each key)."""

    name: str
    path: Path
    values: dict[str, str] = field(default_factory=dict)
    lines: dict[str, int] = field(default_factory=dict)
    problems: dict[str, tuple[str, str]] = field(default_factory=dict)
    duplicates: list[tuple[str, str]] = field(default_factory=list)  # (key, detail): a later line of a kept key


def read_table(path: Path, columns: int | None = None, keep_later: bool = False) -> Table:
    """``path`` as a :class:`Table`. ``columns``: the fields a line must have (``None``: a key and
    any value, which may be empty: ``text``). A key given twice with different values is a
    problem of that key (``duplicate_id``); with ``keep_later`` (the file that lists the
    utterances) the first line is kept and the later one goes to ``duplicates``."""
    t = Table(path.name, path)
    if _fast(path, t, columns):
        return t
    for n, line in _lines(path, t):
        parts = line.split(maxsplit=1)
        key, value = parts[0], (parts[1].strip() if len(parts) > 1 else "")
        if columns is not None and len(line.split()) != columns:
            fields = len(line.split())
            t.problems.setdefault(key, ("bad_line", f"{t.name} line {n}: {fields} fields, not {columns}: {line!r}"))
            continue
        if key in t.values or key in t.problems:
            first = t.lines.get(key)
            if keep_later or (key in t.values and t.values[key] == value):
                if keep_later:
                    t.duplicates.append((key, f"{t.name} line {n}: {key!r} is also on line {first}"))
                continue
            why = f"{t.name} lists {key!r} twice, differently (lines {first} and {n})"
            t.problems.setdefault(key, ("duplicate_id", why))
            t.values.pop(key, None)
            continue
        t.values[key] = value
        t.lines[key] = n
    return t


def _fast(path: Path, t: Table, columns: int | None) -> bool:
    """A clean table (UTF-8, no blank line, no carriage return, each line's fields as
    ``columns`` says, each key once: the common case) read at C speed into ``t``; False
    for any other, which :func:`read_table` reads line by line."""
    if columns not in (None, 2):
        return False
    data = path.read_bytes()
    if data.startswith(b"\xef\xbb\xbf") or b"\r" in data:
        return False
    try:
        lines = data.decode("utf-8").split("\n")
    except UnicodeDecodeError:
        return False
    if lines and lines[-1] == "":
        lines.pop()
    parts = [x.split(maxsplit=1) for x in lines]
    if not all(parts):
        return False
    if columns == 2:
        if not all(len(p) == 2 and " " not in p[1] and "\t" not in p[1] for p in parts):
            return False
        values = dict(parts)
    else:
        values = {p[0]: p[1].strip() if len(p) == 2 else "" for p in parts}
    if len(values) != len(parts):
        return False  # a key given twice
    t.values = values
    t.lines = dict(zip(values, range(1, len(parts) + 1)))
    return True


def _lines(path: Path, t: Table):
    """``(line number, text)`` of each non-blank line of ``path``; a line that is not UTF-8 is a
    problem of its key (``bad_encoding``), shown with escapes. The file is decoded at once and
    line by line only when that fails."""
    data = path.read_bytes()
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    try:
        lines = [(n, x) for n, x in enumerate(data.decode("utf-8").split("\n"), 1)]
    except UnicodeDecodeError:
        lines = []
        for n, raw in enumerate(data.split(b"\n"), 1):
            try:
                lines.append((n, raw.decode("utf-8")))
            except UnicodeDecodeError as e:
                key = raw.split(maxsplit=1)[0].decode("utf-8", "backslashreplace")
                why = f"{t.name} line {n}: invalid UTF-8 byte at column {e.start + 1}"
                t.problems.setdefault(key, ("bad_encoding", why))
    for n, x in lines:
        if x.strip():
            yield n, x.rstrip("\r")


def _optional(d: Path, name: str, columns: int | None = None, keep_later: bool = False) -> Table | None:
    return read_table(d / name, columns, keep_later) if (d / name).is_file() else None


# -- wav.scp -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Audio:
    """Where a recording's audio is: a file and the channel the line names (``None``: all)."""

    path: str
    channel: int | None = None
    sphere: bool = False


class NotRead(Exception):
    """A wav.scp line that is not read: ``reason`` and ``detail`` for its utterances' rejects."""

    def __init__(self, reason: str, detail: str):
        super().__init__(detail)
        self.reason, self.detail = reason, detail


def _flags(args: list[str], takes_value: set[str], flags: set[str]) -> tuple[dict[str, str], list[str]]:
    """``args`` split into options (``takes_value``: each with its value; ``flags``) and the
    rest; an option outside both raises ValueError."""
    opts, rest, i = {}, [], 0
    while i < len(args):
        a = args[i]
        if a in takes_value and i + 1 < len(args):
            opts[a] = args[i + 1]
            i += 2
        elif a in flags:
            opts[a] = ""
            i += 1
        elif a.startswith("-") and a != "-":
            raise ValueError(f"option {a!r}")
        else:
            rest.append(a)
            i += 1
    return opts, rest


def parse_command(command: str) -> Audio:
    """The file (and channel) a recognised decoder command reads (module docstring); ValueError
    for any other command. Nothing is run."""
    words = shlex.split(command)
    if not words or "|" in words:
        raise ValueError("not one command")
    prog, args = os.path.basename(words[0]), words[1:]
    if prog == "sph2pipe":
        opts, rest = _flags(args, {"-f", "-c"}, {"-p"})
        if opts.get("-f", "wav") not in ("wav", "rif") or len(rest) != 1:
            raise ValueError("sph2pipe other than [-f wav] [-p] [-c N] FILE")
        channel = None
        if "-c" in opts:
            if not opts["-c"].isdigit() or int(opts["-c"]) < 1:
                raise ValueError(f"sph2pipe channel {opts['-c']!r}")
            channel = int(opts["-c"]) - 1
        return Audio(rest[0], channel)
    if prog == "flac":
        opts, rest = _flags(args, set(), {"-c", "-d", "-s", "--stdout", "--decode", "--silent"})
        if not ({"-d", "--decode"} & set(opts) and {"-c", "--stdout"} & set(opts)) or len(rest) != 1:
            raise ValueError("flac other than -c -d [-s] FILE")
        return Audio(rest[0])
    if prog == "sox":
        if len(args) == 4 and args[1:] == ["-t", "wav", "-"]:
            return Audio(args[0])
        raise ValueError("sox other than FILE -t wav -")
    if prog == "ffmpeg":
        opts, rest = _flags(args, {"-i", "-f", "-loglevel", "-v", "-ac"}, {"-hide_banner", "-nostdin", "-y"})
        if "-i" not in opts or opts.get("-f") != "wav" or rest != ["-"] or opts.get("-ac", "1") != "1":
            raise ValueError("ffmpeg other than -i FILE -f wav -")
        return Audio(opts["-i"])
    raise ValueError(f"{prog!r} is not a decoder read here")


def wav_scp_audio(value: str, where: str, check_file: bool = True) -> Audio:
    """A wav.scp value as the audio it names (raises :class:`NotRead`); ``check_file``: one that is
    not there is ``missing`` (else a stage finds it missing)."""
    v = value.strip()
    if v.endswith("|"):
        try:
            audio = parse_command(v[:-1])
        except ValueError as e:
            raise NotRead(
                "command_not_allowed", f"{where}: a command, never run, that is not a decoder read here ({e}): {v!r}"
            ) from None
    else:
        audio = Audio(v)
    path = os.path.abspath(audio.path)
    if check_file and not os.path.isfile(path):
        raise NotRead("missing", f"{where}: {path} does not exist")
    sphere = path.lower().endswith(".sph")
    return Audio(path, audio.channel, sphere)


def sphere_header(path: str) -> tuple[int, dict[str, str]]:
    """A NIST SPHERE file's header: its size in bytes (the header's second line) and its fields
    (``name -type value``: each name's value as text); NotRead if the file has none."""
    try:
        with open(path, "rb") as f:
            head = f.read(1024)
            lines = head.split(b"\n", 2)
            size = int(lines[1]) if len(lines) > 2 and lines[1].strip().isdigit() else 0
            if size > len(head):
                head += f.read(size - len(head))
    except OSError as e:
        raise NotRead("missing", f"{path}: {e.strerror or e}") from None
    if not head.startswith(b"NIST_1A") or size < 16:
        raise NotRead("unreadable", f"{path}: no NIST SPHERE header (NIST_1A and its size)")
    fields = {}
    for raw in head[:size].split(b"\n")[2:]:
        parts = raw.split(None, 2)
        if parts and parts[0] == b"end_head":
            break
        if len(parts) == 3 and parts[1].startswith(b"-"):
            fields[parts[0].decode("ascii", "replace")] = parts[2].decode("ascii", "replace").strip()
    return size, fields


def sphere_coding(path: str) -> str:
    """The ``sample_coding`` field of a NIST SPHERE header (``pcm`` when absent); NotRead if the
    file has no SPHERE header."""
    return sphere_header(path)[1].get("sample_coding", "pcm")


def sphere_seconds(path: str) -> float | None:
    """A NIST SPHERE file's seconds from its header (``sample_count`` over ``sample_rate``;
    None where it lacks them): a shorten file's length without decoding it."""
    fields = sphere_header(path)[1]
    count, rate = _seconds(fields.get("sample_count", "")), _seconds(fields.get("sample_rate", ""))
    return count / rate if count and rate else None


def decoded_name(path: str) -> str:
    """The name of a shorten SPHERE file's FLAC: the file's (its stem and a digest of its absolute
    path), so that the recordings of one file (``-c 1`` and ``-c 2`` of a telephone call) share
    one decode."""
    import hashlib

    full = os.path.abspath(path)
    return f"{Path(full).stem}-{hashlib.sha1(full.encode('utf-8')).hexdigest()[:10]}"


def decode_shorten(path: str, audio_dir: str, key: str) -> str:
    """A shorten-compressed SPHERE file decoded once, all its channels, into
    ``audio_dir/<key>.flac`` at its own rate (written atomically; left alone when there): by
    ``sph2pipe`` called on the file where it is installed, else by ffmpeg's shorten decoder
    (:func:`shorten_samples`). NotRead ``no_decoder`` without either, ``bad_shorten`` (with the
    tool's message) for a stream that does not decode to the header's ``sample_count``."""
    import soundfile as sf

    out = Path(audio_dir) / f"{key}.flac"
    if out.is_file():
        return str(out)
    _, fields = sphere_header(path)
    sph2pipe, ffmpeg = shutil.which("sph2pipe"), shutil.which("ffmpeg")
    if sph2pipe is None and ffmpeg is None:
        raise NotRead(
            "no_decoder", f"{path}: shorten-compressed NIST SPHERE needs sph2pipe or ffmpeg, neither installed"
        )
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=out.parent) as tmp:
        if sph2pipe is not None:
            wav = Path(tmp) / "x.wav"
            p = subprocess.run([sph2pipe, "-f", "wav", "-p", path, str(wav)], capture_output=True)
            if p.returncode != 0 or not wav.is_file():
                raise NotRead("bad_shorten", f"{path}: sph2pipe failed: {p.stderr.decode('utf-8', 'replace')[-300:]}")
            x, rate = sf.read(str(wav), dtype="int16", always_2d=True)
        else:
            x, rate = shorten_samples(ffmpeg, path)
        count = fields.get("sample_count", "")
        if count.isdigit() and len(x) != int(count):
            tool = "sph2pipe" if sph2pipe is not None else "ffmpeg"
            why = f"{path}: {tool} decoded {len(x)} samples per channel, the header says sample_count {count}"
            raise NotRead("bad_shorten", why)
        part = Path(tmp) / "x.flac"
        sf.write(str(part), x, rate, format="FLAC", subtype="PCM_16")
        os.replace(part, out)
    return str(out)


# -- shorten through ffmpeg ------------------------------------------------------------------
# ffmpeg's shorten decoder (libavcodec/shorten.c) takes its sample rate from a RIFF (or AIFF)
# header that the stream must carry in a verbatim chunk right after its parameters, as the
# shorten tool writes it for a WAV file; NIST's embedded streams (the ``ajkg`` magic straight
# after the SPHERE header, then the parameters and the blocks) have none, and sph2pipe knows no
# verbatim command. So the stream goes to ffmpeg with a canonical 44-byte RIFF header spliced in
# after its parameters: 5 + 7 + 44 x 9 = 408 bits, whole bytes, so the blocks after it are the
# file's own bytes. The stream's bit codes: ``uvar(k)``, ``v >> k`` zeros, a one, then ``k`` low
# bits; ``ulong``, ``uvar(uvar(2))``.

SHORTEN_PCM16 = (3, 5)  # the stream's sample types ffmpeg decodes to int16: signed 16-bit, big-/little-endian


class _Bits:
    """A most-significant-bit-first reader of a shorten stream's parameters."""

    def __init__(self, data: bytes) -> None:
        self.value, self.size, self.at = int.from_bytes(data, "big"), len(data) * 8, 0

    def uvar(self, k: int) -> int:
        zeros = 0
        while not self._bit():
            zeros += 1
        low = 0
        for _ in range(k):
            low = low << 1 | self._bit()
        return zeros << k | low

    def ulong(self) -> int:
        k = self.uvar(2)
        if k > 31:
            raise ValueError(f"a parameter of {k} bits")
        return self.uvar(k)

    def _bit(self) -> int:
        if self.at >= self.size:
            raise ValueError("the stream ends inside its parameters")
        self.at += 1
        return self.value >> (self.size - self.at) & 1


def _uvar_bits(v: int, k: int) -> str:
    return "0" * (v >> k) + "1" + (format(v & ((1 << k) - 1), f"0{k}b") if k else "")


def shorten_for_ffmpeg(data: bytes, rate: int) -> tuple[bytes, int]:
    """An embedded shorten stream (``data``: the bytes after the SPHERE header) as ffmpeg's
    decoder reads it, and its channels; ValueError for one that is not 16-bit PCM shorten."""
    if data[:4] != b"ajkg" or len(data) < 5 or data[4] not in (1, 2):
        raise ValueError(f"no shorten stream (the magic ajkg and version 1 or 2) after the header: {data[:5]!r}")
    params = data[5:69]
    bits = _Bits(params)
    ftype, channels, _blocksize, _maxnlpc, _nmean, nskip = (bits.ulong() for _ in range(6))
    if ftype not in SHORTEN_PCM16:
        raise ValueError(f"shorten sample type {ftype}, not signed 16-bit PCM")
    if not 1 <= channels <= 8 or nskip:
        raise ValueError(f"a stream of {channels} channels that keeps {nskip} header bytes")
    riff = b"RIFF" + (36).to_bytes(4, "little") + b"WAVEfmt " + (16).to_bytes(4, "little")
    riff += b"\x01\x00" + channels.to_bytes(2, "little") + rate.to_bytes(4, "little")
    riff += (rate * channels * 2).to_bytes(4, "little") + (channels * 2).to_bytes(2, "little") + b"\x10\x00"
    riff += b"data" + bytes(4)
    chunk = _uvar_bits(9, 2) + _uvar_bits(len(riff), 5) + "".join(_uvar_bits(b, 8) for b in riff)
    whole = min(bits.at // 8 + 1, len(params))  # the bytes holding the parameters
    head = format(int.from_bytes(params[:whole], "big"), f"0{whole * 8}b")
    spliced = head[: bits.at] + chunk + head[bits.at :]
    return data[:5] + int(spliced, 2).to_bytes(len(spliced) // 8, "big") + data[5 + whole :], channels


def shorten_samples(ffmpeg: str, path: str) -> tuple[np.ndarray, int]:
    """A shorten-compressed SPHERE file's samples (int16, frames x channels) and rate, decoded by
    ``ffmpeg`` (a fixed argv; the stream through a pipe); NotRead ``bad_shorten`` with ffmpeg's
    message where it fails, ``no_decoder`` for a coding ffmpeg's decoder lacks (mu-law)."""
    import numpy as np

    size, fields = sphere_header(path)
    coding = fields.get("sample_coding", "pcm")
    if not coding.startswith("pcm") or fields.get("sample_n_bytes", "2") != "2":
        n = fields.get("sample_n_bytes", "2")
        why = f"{path}: {coding} ({n}-byte samples) needs sph2pipe; ffmpeg decodes 16-bit PCM shorten alone"
        raise NotRead("no_decoder", why)
    rate = fields.get("sample_rate", "")
    if not rate.isdigit() or int(rate) == 0:
        raise NotRead("bad_shorten", f"{path}: the header gives no sample_rate ({rate!r})")
    with open(path, "rb") as f:
        f.seek(size)
        data = f.read()
    try:
        stream, channels = shorten_for_ffmpeg(data, int(rate))
    except ValueError as e:
        raise NotRead("bad_shorten", f"{path}: {e}") from None
    if fields.get("channel_count", str(channels)) != str(channels):
        why = f"{path}: the header says channel_count {fields['channel_count']}, its shorten stream {channels}"
        raise NotRead("bad_shorten", why)
    argv = [ffmpeg, "-hide_banner", "-nostdin", "-v", "error", "-f", "shn", "-i", "pipe:0"]
    p = subprocess.run(
        [*argv, "-map", "0:a:0", "-f", "s16le", "-c:a", "pcm_s16le", "pipe:1"], input=stream, capture_output=True
    )
    if p.returncode != 0 or p.stderr.strip():
        said = dict.fromkeys(x.strip() for x in p.stderr.decode("utf-8", "replace").splitlines() if x.strip())
        raise NotRead("bad_shorten", f"{path}: ffmpeg failed: {'; '.join(said)[:400]}")
    x = np.frombuffer(p.stdout, "<i2")
    return x[: len(x) // channels * channels].reshape(-1, channels), int(rate)


# -- the directory ----------------------------------------------------------------------------


def _seconds(value: str) -> float | None:
    try:
        x = float(value)
    except ValueError:
        return None
    return x if math.isfinite(x) else None


def read(spec: str | dict, out: Sink) -> None:
    """Every utterance of the Kaldi data directory ``spec`` into ``out`` (module docstring)."""
    d = Path(spec if isinstance(spec, str) else spec.get("dir", "")).absolute()
    if not (d / "wav.scp").is_file():
        raise UsageError(f"kaldi: {d} is not a Kaldi data directory (it has no wav.scp)")
    _Reading(d, out).run()


class _Reading:
    """One pass over a Kaldi directory: its tables, each recording's audio, each utterance once."""

    def __init__(self, d: Path, out: Sink) -> None:
        self.out = out
        self.segments = _optional(d, "segments", columns=4, keep_later=True)
        self.wav = read_table(
            d / "wav.scp", keep_later=self.segments is None
        )  # no segments: a recording is one utterance
        self.side = {name: _optional(d, name, columns=None if name == "text" else 2) for name in UTTERANCE_FILES}
        self.spk2gender = _optional(d, "spk2gender", columns=2)
        self.reco2dur = _optional(d, "reco2dur", columns=2)
        self.speakers = _speakers(self.side["utt2spk"], _optional(d, "spk2utt"))
        self.done: set[str] = set()
        self.listed_sphere: dict[str, float | None] = {}  # a listing's undecoded shorten files: their seconds

    def reject(self, key: str, path: str | None, reason: str, detail: str) -> None:
        self.done.add(key)
        self.out.reject(key, path, reason, detail)

    def run(self) -> None:
        audio = self.recordings()
        utts = self.utterances(audio)
        problems = self.problems()
        for utt, (reco, start, end) in utts.items():
            if utt not in self.done:
                self.utterance(utt, audio.get(reco), reco, start, end, problems)
        self.leftovers(problems)

    def wanted_recordings(self) -> set[str] | None:
        """The recordings an utterance of the sink's selection is in (None: every one)."""
        if self.out.only is None:
            return None
        if self.segments is None:
            return set(self.out.only)
        return {v.split(None, 1)[0] for utt, v in self.segments.values.items() if wanted(self.out, utt) and v.strip()}

    def recordings(self) -> dict[str, Audio | NotRead]:
        """Each recording's audio, or why it is not read (the reject of each of its utterances).
        A shorten SPHERE file is decoded for a recording the sink takes, outside a listing."""
        audio: dict[str, Audio | NotRead] = {}
        take = self.wanted_recordings()
        for reco, value in self.wav.values.items():
            try:
                a = wav_scp_audio(value, f"wav.scp line {self.wav.lines[reco]}", self.out.check_files)
                if a.sphere and "shorten" in sphere_coding(a.path) and (take is None or reco in take):
                    if self.out.write_audio:
                        a = Audio(decode_shorten(a.path, self.out.audio_dir, decoded_name(a.path)), a.channel)
                    else:
                        self.listed_sphere[a.path] = sphere_seconds(a.path)
                audio[reco] = a
            except NotRead as e:
                audio[reco] = e
        for reco, (reason, detail) in self.wav.problems.items():
            audio[reco] = NotRead(reason, detail)
        return audio

    def utterances(self, audio: dict) -> dict[str, tuple[str, float | None, float | None]]:
        """The utterances: segments lines, else wav.scp's recordings whole."""
        segments = self.segments
        if segments is None:
            return {reco: (reco, None, None) for reco in audio}
        utts: dict[str, tuple[str, float | None, float | None]] = {}
        for utt, value in segments.values.items():
            reco, start, end = value.split()
            s, e = _seconds(start), _seconds(end)
            if s is None or e is None or s < 0 or (e != -1 and e <= s):
                self.reject(utt, None, "segment_out_of_range", f"segments line {segments.lines[utt]}: {utt} {value!r}")
                continue
            utts[utt] = (reco, s, None if e == -1 else e)
        for utt, (reason, detail) in segments.problems.items():
            self.reject(utt, None, reason, detail)
        used = {reco for reco, _, _ in utts.values()}
        for reco in audio:
            if reco not in used:
                path = audio[reco].path if isinstance(audio[reco], Audio) else None
                self.reject(reco, path, "no_segments", f"wav.scp lists recording {reco!r}; no segments line is in it")
        return utts

    def problems(self) -> dict[str, tuple[str, str]]:
        """Each utterance's first problem in a side table or the speaker files."""
        problems: dict[str, tuple[str, str]] = {}
        for t in self.side.values():
            for key, why in t.problems.items() if t is not None else ():
                problems.setdefault(key, why)
        for utt, why in self.speakers.problems.items():
            problems.setdefault(utt, why)
        return problems

    def utterance(self, utt: str, a, reco: str, start, end, problems: dict) -> None:
        """One utterance's line, or its reject."""
        if utt in problems:
            return self.reject(utt, a.path if isinstance(a, Audio) else None, *problems[utt])
        if a is None:
            return self.reject(utt, None, "no_recording", f"segments names recording {reco!r}, which wav.scp lacks")
        if isinstance(a, NotRead):
            return self.reject(utt, None, a.reason, a.detail)
        rec: dict = {"source_id": utt, "audio_filepath": a.path}
        if a.channel is not None:
            rec["channel"] = a.channel
        if not self.timing(rec, utt, a.path, reco, start, end):
            return None
        self.labels(rec, utt)
        self.done.add(utt)
        self.out.line(rec)
        return None

    def timing(self, rec: dict, utt: str, path: str, reco: str, start, end) -> bool:
        """``offset``/``duration`` from segments, utt2dur or reco2dur; False when rejected."""
        r2d = self.reco2dur
        total = _seconds(r2d.values[reco]) if r2d is not None and reco in r2d.values else None
        if start is None:
            dur = self.side["utt2dur"].values.get(utt) if self.side["utt2dur"] is not None else None
            dur = _seconds(dur) if dur is not None else total
            dur = dur if dur is not None else self.listed_sphere.get(path)
            if dur is not None and dur > 0:
                rec["duration"] = dur
            return True
        stop = end if end is not None else total
        if stop is None:
            try:
                stop = self.listed_sphere.get(path) or _header_seconds(path)
            except Exception as e:  # noqa: BLE001 (libsndfile's errors: the file's reject)
                self.reject(utt, path, "unreadable", f"not a readable audio file ({type(e).__name__}: {e})")
                return False
        if total is not None and stop > total + SEGMENT_END_SLACK:
            self.reject(utt, path, "segment_out_of_range", f"ends at {stop:.3f} s, past reco2dur's {total:.3f} s")
            return False
        rec["offset"], rec["duration"] = start, round(stop - start, 6)
        return True

    def labels(self, rec: dict, utt: str) -> None:
        """What the directory says of the utterance: text, speaker, gender, language."""
        if self.side["text"] is not None and utt in self.side["text"].values:
            rec["text"] = self.side["text"].values[utt]
        spk = self.speakers.of.get(utt)
        if spk:
            rec["speaker"] = spk
            g = self.spk2gender.values.get(spk) if self.spk2gender is not None else None
            if g:
                rec["gender"] = GENDERS.get(g.lower(), g)
        if self.side["utt2lang"] is not None and utt in self.side["utt2lang"].values:
            rec["language"] = self.side["utt2lang"].values[utt]

    def leftovers(self, problems: dict) -> None:
        """Later duplicates of an utterance, and every key no utterance has."""
        for key, detail in (self.segments or self.wav).duplicates:
            self.out.reject(key, None, "duplicate_id", detail)
        listing = "segments" if self.segments is not None else "wav.scp"
        for name, t in self.side.items():
            for key in t.values if t is not None else ():
                if key not in self.done:
                    why = "speaker_mismatch" if name == "utt2spk" else "no_recording"
                    self.reject(key, None, why, f"{name} lists {key!r}, which {listing} lacks")
        for key in sorted(self.speakers.listed - self.done):
            self.reject(key, None, "speaker_mismatch", f"spk2utt lists {key!r}, which {listing} lacks")
        for key, (reason, detail) in problems.items():
            if key not in self.done:
                self.reject(key, None, reason, detail)


def _header_seconds(path: str) -> float:
    import soundfile as sf

    info = sf.info(path)
    return info.frames / info.samplerate


@dataclass
class Speakers:
    of: dict[str, str]  # utterance -> speaker
    problems: dict[str, tuple[str, str]]  # utterance -> (reason, detail)
    listed: set[str]  # the utterances spk2utt lists


def _speakers(utt2spk: Table | None, spk2utt: Table | None) -> Speakers:
    """Each utterance's speaker (``utt2spk``), and the utterances where ``spk2utt`` disagrees."""
    of = dict(utt2spk.values) if utt2spk is not None else {}
    problems: dict[str, tuple[str, str]] = {}
    listed: set[str] = set()
    if spk2utt is None:
        return Speakers(of, problems, listed)
    by_utt: dict[str, str] = {}
    for spk, value in spk2utt.values.items():
        for utt in value.split():
            listed.add(utt)
            if utt in by_utt and by_utt[utt] != spk:
                why = f"spk2utt lists {utt!r} under {by_utt[utt]!r} and {spk!r}"
                problems.setdefault(utt, ("speaker_mismatch", why))
            by_utt.setdefault(utt, spk)
    for utt in set(of) | set(by_utt):
        a, b = of.get(utt), by_utt.get(utt)
        if a != b and utt not in problems:
            if a and b:
                why = f"utt2spk gives {utt!r} speaker {a!r}, spk2utt {b!r}"
            else:
                why = f"{'utt2spk' if a else 'spk2utt'} gives {utt!r} speaker {a or b!r}, the other file none"
            problems[utt] = ("speaker_mismatch", why)
    for utt in problems:
        of.pop(utt, None)
    return Speakers(of, problems, listed)
