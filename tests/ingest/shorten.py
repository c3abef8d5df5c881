"""A small shorten encoder, for the tests only: no shorten encoder is packaged in Debian, and
the Kaldi reader's decoding of LDC's shorten-compressed NIST SPHERE files
(speechprep.ingest.sources.kaldi) must be tested on such files.

A shorten stream (Tony Robinson's format, version 2, as NIST SPHERE embeds it) is a bit stream,
most significant bit first. ``uvar(v, k)`` writes ``v >> k`` zeros, a one, then the low ``k``
bits of ``v``; ``svar(v, k)`` writes ``uvar`` of ``2v`` (``v >= 0``) or ``-2v - 1`` with
``k + 1`` low bits; ``ulong(v)`` writes ``uvar(n, 2)`` then ``uvar(v, n)``, ``n`` the bits of
``v``. The stream:

* the magic ``ajkg`` and the version byte (2);
* ``ulong`` each: the sample type (5: signed 16-bit little-endian, 3: big-endian), the
  channels, the block size, the LPC order (0: none), the number of block means (4) and the
  number of header bytes to skip (0);
* optionally a verbatim chunk (``uvar(9, 2)``, ``uvar(length, 5)``, each byte ``uvar(b, 8)``):
  the RIFF header shorten keeps of a WAV file; NIST's embedded streams have none;
* per block, per channel in turn: a command ``uvar(cmd, 2)`` (``DIFF1``..``DIFF3``: the
  residual of the fixed polynomial predictor of that order over the channel's previous
  samples, zero before the first), its energy ``uvar(k, 3)`` and each residual ``svar(r, k)``;
  a last, shorter block is announced by ``uvar(5, 2)`` (BLOCKSIZE) and ``ulong(n)``;
* ``uvar(4, 2)`` (QUIT), zero bits to a whole 32-bit word.
"""

from __future__ import annotations

import struct

import numpy as np

BLOCK = 256
FN_DIFF = {1: (1,), 2: (2, -1), 3: (3, -3, 1)}  # the fixed predictors' coefficients by order
FN_QUIT, FN_BLOCKSIZE, FN_VERBATIM = 4, 5, 9
TYPE_S16HL, TYPE_S16LH = 3, 5


def uvar(v: int, k: int) -> str:
    return "0" * (v >> k) + "1" + (format(v & ((1 << k) - 1), f"0{k}b") if k else "")


def ulong(v: int) -> str:
    n = v.bit_length()
    return uvar(n, 2) + uvar(v, n)


def residuals(x: np.ndarray, history: np.ndarray, order: int) -> np.ndarray:
    """The residuals of ``x`` (int64) under the fixed predictor of ``order``, given the three
    samples before it (``history``, oldest first)."""
    full = np.concatenate([history, x])
    pred = np.zeros(len(x), np.int64)
    for j, c in enumerate(FN_DIFF[order], 1):
        pred += c * full[3 - j : len(full) - j]
    return x - pred


def energy(u: np.ndarray) -> int:
    """The Rice parameter ``k`` that codes the folded residuals ``u`` in the fewest bits."""
    return min(range(21), key=lambda k: int((u >> (k + 1)).sum()) + len(u) * (k + 2))


def wav_header(rate: int, channels: int, frames: int) -> bytes:
    """The 44-byte RIFF header of 16-bit PCM."""
    data, align = frames * channels * 2, channels * 2
    fields = [b"RIFF", 36 + data, b"WAVE", b"fmt ", 16, 1, channels, rate, rate * align, align, 16, b"data", data]
    return struct.pack("<4sI4s4sIHHIIHH4sI", *fields)


def encode(x: np.ndarray, byte_format: str = "01", verbatim: bytes | None = None) -> bytes:
    """``x`` (int16, frames x channels) as a shorten version 2 stream; ``verbatim``: bytes kept
    in a verbatim chunk before the audio (a WAV file's RIFF header)."""
    x = np.asarray(x, np.int64)
    x = x[:, None] if x.ndim == 1 else x
    frames, channels = x.shape
    head = [ulong(TYPE_S16LH if byte_format == "01" else TYPE_S16HL), ulong(channels), ulong(BLOCK)]
    head += [ulong(0), ulong(4), ulong(0)]
    if verbatim is not None:
        head += [uvar(FN_VERBATIM, 2), uvar(len(verbatim), 5), *(uvar(b, 8) for b in verbatim)]
    body = []
    history = np.zeros((3, channels), np.int64)
    for start in range(0, frames, BLOCK):
        block = x[start : start + BLOCK]
        if len(block) < BLOCK:
            body.append(uvar(FN_BLOCKSIZE, 2) + ulong(len(block)))
        for c in range(channels):
            best = min(FN_DIFF, key=lambda o: int(np.abs(residuals(block[:, c], history[:, c], o)).sum()))
            r = residuals(block[:, c], history[:, c], best)
            u = np.where(r >= 0, 2 * r, -2 * r - 1)
            k = energy(u)
            body.append(uvar(best, 2) + uvar(k, 3) + "".join(uvar(int(v), k + 1) for v in u))
        history = np.concatenate([history, block])[-3:]
    body.append(uvar(FN_QUIT, 2))
    stream = "".join(head + body)
    stream += "0" * (-(len(stream) + 40) % 32)  # 40: the magic's and version's bits
    return b"ajkg\x02" + int(stream, 2).to_bytes(len(stream) // 8, "big")


def sphere(x: np.ndarray, rate: int, byte_format: str = "01", stream: bytes | None = None) -> bytes:
    """A NIST SPHERE file as LDC writes its shorten-compressed corpora: the 1024-byte header
    (``sample_coding -s26 pcm,embedded-shorten-v2.00``, ``sample_count``, ``sample_rate``,
    ``channel_count``, ``sample_n_bytes 2``, ``sample_byte_format``, ``sample_sig_bits 16``),
    then the shorten stream of ``x`` (or ``stream`` as given) straight after it."""
    x = x[:, None] if x.ndim == 1 else x
    fields = [
        f"sample_count -i {len(x)}",
        f"sample_rate -i {rate}",
        f"channel_count -i {x.shape[1]}",
        "sample_n_bytes -i 2",
        f"sample_byte_format -s2 {byte_format}",
        "sample_sig_bits -i 16",
        "sample_coding -s26 pcm,embedded-shorten-v2.00",
        "end_head",
    ]
    head = ("NIST_1A\n   1024\n" + "".join(f + "\n" for f in fields)).encode("ascii").ljust(1024, b" ")
    return head + (stream if stream is not None else encode(x, byte_format))
