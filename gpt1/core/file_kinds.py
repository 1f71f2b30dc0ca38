"""What kind of file a path holds, told from its first bytes, so that a file given in the wrong place is refused by
what it is ("... is a PNG image, not a checkpoint") rather than by what its reader failed on."""

from __future__ import annotations

import os
import struct
from typing import Optional

HEAD_BYTES = 4096

_MAGIC = (
    (b"\x89PNG\r\n\x1a\n", "a PNG image"),
    (b"\xff\xd8\xff", "a JPEG image"),
    (b"GIF87a", "a GIF image"),
    (b"GIF89a", "a GIF image"),
    (b"%PDF-", "a PDF document"),
    (b"\x1f\x8b", "a gzip archive"),
    (b"BZh", "a bzip2 archive"),
    (b"\xfd7zXZ\x00", "an xz archive"),
    (b"\x28\xb5\x2f\xfd", "a zstd archive"),
    (b"7z\xbc\xaf\x27\x1c", "a 7z archive"),
    (b"\x7fELF", "an ELF executable"),
    (b"PAR1", "a parquet table"),
    (b"SQLite format 3\x00", "an SQLite database"),
    (b"\x93NUMPY", "a NumPy array file"),
    (b"ARROW1", "an Arrow file"),
)
"""First bytes -> the kind they open (each format's signature)."""

TORCH_LEGACY = b"\x8a\x0al\xfc\x9cF\xf9 j\xa8P\x19."
"""The magic number torch's legacy (pre-zip) format pickles first, after the pickle's protocol bytes."""


def head(path: str | os.PathLike, size: int = HEAD_BYTES) -> bytes:
    """The first ``size`` bytes of the file ``path`` (b"" where it cannot be read)."""
    try:
        with open(path, "rb") as f:
            return f.read(size)
    except OSError:
        return b""


def binary_kind(data: bytes) -> Optional[str]:
    """The kind of binary file whose first bytes are ``data`` ("a PNG image", "a Python pickle", "a zip archive",
    "a torch checkpoint", ...), or None for text or a kind not known here."""
    for magic, kind in _MAGIC:
        if data.startswith(magic):
            return kind
    if data.startswith(b"PK\x03\x04"):
        return "a torch checkpoint (a zip archive)" if b"data.pkl" in data[:HEAD_BYTES] else "a zip archive"
    if len(data) >= 2 and data[0] == 0x80 and 2 <= data[1] <= 5:
        return "a torch checkpoint of torch's legacy format" if data[2:].startswith(TORCH_LEGACY) else "a Python pickle"
    if len(data) >= 10:  # safetensors: an 8-byte little-endian header length, then its JSON header
        (length,) = struct.unpack("<Q", data[:8])
        if 0 < length < 100_000_000 and data[8:9] == b"{":
            return "a safetensors file"
    return None


def describe(path: str | os.PathLike) -> str:
    """What ``path`` holds, in words for an error line: "an empty file", a binary kind (``binary_kind``), "NUL
    bytes", "a JSON document", "a text file (its first line: 'text,label')", or "a binary file"."""
    data = head(path)
    if not data:
        return "an empty file"
    kind = binary_kind(data)
    if kind is not None:
        return kind
    if data.strip(b"\x00") == b"":
        return "NUL bytes"
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        if e.start < len(data) - 4:  # (a character cut by the head's end is text all the same)
            return "a binary file"
        text = data[: e.start].decode("utf-8")
    stripped = text.lstrip()
    if stripped[:1] in ("{", "["):
        return "a JSON document" if stripped[:1] == "{" else "a JSON (or YAML) list"
    first = stripped.splitlines()[0][:40] if stripped else ""
    return f"a text file (its first line: {first!r})"
