"""File names derived from ids (docs/outputs.md, the paragraph on ids).

An id can be any text: a 247-byte file name gives a longer segment id, and
``<id>.npy`` plus a temp-file prefix would exceed the 255-byte limit of
common file systems. :func:`file_stem` keeps short ids as they are and turns
a long one into a readable prefix plus a hash of the whole id; the line that
names the file always carries the full ``id``.
"""

from __future__ import annotations

import hashlib

# Bytes a stem may take: leaves room for a suffix (".wav", ".npy", ".rejects.jsonl")
# and atomic_open's temp-file decoration within 255 bytes.
MAX_STEM_BYTES = 160
_HASH_CHARS = 16
_UNSAFE = frozenset("/\0")


def id_digest(id_: str) -> int:
    """An id's 8-byte BLAKE2b digest as an integer (big-endian; a lone surrogate encoded as
    is): ingest's stable shard of an id, export's sorted index of ids."""
    return int.from_bytes(hashlib.blake2b(id_.encode("utf-8", "surrogatepass"), digest_size=8).digest(), "big")


def file_stem(id_: str) -> str:
    """A file-name stem for ``id_``: the id itself when it is short enough and holds
    nothing a file name cannot (``/``, NUL, a lone surrogate; not ``.``/``..``),
    else a readable prefix (cut at a character boundary) + ``-`` + 16 hex digits
    of the id's sha256, so different ids never share a name."""
    raw = id_.encode("utf-8", "surrogatepass")
    safe = not (_UNSAFE & set(id_)) and id_ not in ("", ".", "..") and utf8_encodable(id_)
    if safe and len(raw) <= MAX_STEM_BYTES:
        return id_
    digest = hashlib.sha256(raw).hexdigest()[:_HASH_CHARS]
    readable = "".join("_" if c in _UNSAFE or not utf8_encodable(c) else c for c in id_)
    prefix = readable.encode("utf-8")[: MAX_STEM_BYTES - _HASH_CHARS - 1].decode("utf-8", "ignore")
    return f"{prefix}-{digest}"


def utf8_encodable(s: str) -> bool:
    """Whether ``s`` can be written as UTF-8 (a lone surrogate from a badly encoded file name cannot)."""
    try:
        s.encode("utf-8")
        return True
    except UnicodeEncodeError:
        return False
