"""Mutations every file surface shares: cuts and bit flips of a valid file's bytes, its text in other encodings, files
of the wrong kind, and paths that are not readable files. Each strategy draws ``(what, content)``: ``what`` says the
mutation in words (a case's description), ``content`` is what ``tests.fuzz.world.write`` writes."""

from __future__ import annotations

import codecs
import gzip
import io
import json
import pickle
import struct
import zipfile
import zlib

from hypothesis import strategies as st

from tests.fuzz.world import Huge, Special


@st.composite
def damaged(draw, valid: bytes) -> tuple[str, bytes]:
    """``valid`` cut short, with bits flipped, with bytes inserted or with a span deleted: it may or may not still be
    usable (the case's verdict is "either" unless the surface knows better)."""
    kind = draw(st.sampled_from(["cut", "flip", "insert", "delete"]))
    n = len(valid)
    if kind == "cut" or n == 0:
        at = draw(st.integers(0, max(n - 1, 0)))
        return f"cut to {at} of {n} bytes", valid[:at]
    if kind == "flip":
        data = bytearray(valid)
        spots = draw(st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, 7)), min_size=1, max_size=4))
        for at, bit in spots:
            data[at] ^= 1 << bit
        return f"bits flipped at {sorted({at for at, _ in spots})} of {n} bytes", bytes(data)
    if kind == "insert":
        at = draw(st.integers(0, n))
        junk = draw(st.binary(min_size=1, max_size=16))
        return f"{len(junk)} bytes {junk!r} inserted at {at} of {n}", valid[:at] + junk + valid[at:]
    start = draw(st.integers(0, n - 1))
    end = draw(st.integers(start + 1, min(n, start + 64)))
    return f"bytes {start}-{end} of {n} deleted", valid[:start] + valid[end:]


ENCODINGS = {
    "UTF-16 with a byte-order mark": lambda text: text.encode("utf-16"),
    "UTF-16LE without a byte-order mark": lambda text: text.encode("utf-16-le"),
    "UTF-16BE without a byte-order mark": lambda text: text.encode("utf-16-be"),
    "UTF-32 with a byte-order mark": lambda text: text.encode("utf-32"),
    "Latin-1": lambda text: text.encode("latin-1", errors="replace"),
    "UTF-8 with a byte-order mark": lambda text: codecs.BOM_UTF8 + text.encode("utf-8"),
    "invalid UTF-8 (a stray 0xff byte)": lambda text: _stray_byte(text),
}
"""How a text file's bytes may come in another encoding. Their texts hold "café" (a character outside ASCII) where
the surface puts it, so that Latin-1 differs from UTF-8."""


def _stray_byte(text: str) -> bytes:
    data = text.encode("utf-8")
    at = data.find(b"\n") + 1 if b"\n" in data else len(data) // 2
    return data[:at] + b"\xff" + data[at:]


def in_encoding(text: str) -> st.SearchStrategy[tuple[str, bytes]]:
    """``text`` in one of ``ENCODINGS``: (its name, the bytes)."""
    return st.sampled_from(sorted(ENCODINGS)).map(lambda name: (name, ENCODINGS[name](text)))


def _png() -> bytes:
    raw = b"\x00\xff\x00\x00"  # one red pixel, its row's filter byte first
    chunk = lambda kind, data: (  # noqa: E731
        struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)
    )
    ihdr = struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b"")


def _zip_of_text() -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as z:
        z.writestr("notes.txt", "a zip archive of notes, not a checkpoint\n")
    return buffer.getvalue()


def _parquet() -> bytes:
    import pyarrow as pa
    import pyarrow.parquet as pq

    buffer = io.BytesIO()
    pq.write_table(pa.table({"text": ["a parquet table"], "label": ["pos"]}), buffer)
    return buffer.getvalue()


WRONG_KINDS = {
    "a PNG image": _png,
    "a JPEG image": lambda: b"\xff\xd8\xff\xe0\x00\x10JFIF\x00\x01\x01\x00\x00\x01\x00\x01\x00\x00" + b"\x00" * 64,
    "a PDF document": lambda: b"%PDF-1.4\n1 0 obj << /Type /Catalog >> endobj\ntrailer << /Root 1 0 R >>\n%%EOF\n",
    "a gzip archive": lambda: gzip.compress(b"some text, compressed\n"),
    "a zip archive of text": _zip_of_text,
    "an ELF executable": lambda: b"\x7fELF\x02\x01\x01" + b"\x00" * 57,
    "a raw pickle": lambda: pickle.dumps({"weights": [0.1, 0.2], "step": 3}, protocol=4),
    "a parquet table": _parquet,
    "a CSV table": lambda: b"text,label\na fine film,pos\na dull film,neg\n",
    "a JSON document": lambda: json.dumps({"model": "gpt1", "layers": 2}).encode(),
    "a YAML document": lambda: b"model:\n  n_layer: 2\n  n_embd: 32\n",
    "NUL bytes": lambda: b"\x00" * 256,
    "random bytes": lambda: bytes((i * 131 + 7) % 256 for i in range(512)),
}
"""Files of another kind than the surface reads, each as its first bytes (enough for a reader to tell what it is)."""


def wrong_kind(*exclude: str) -> st.SearchStrategy[tuple[str, bytes]]:
    """A file of another kind (``WRONG_KINDS`` less ``exclude``): (what it is, its bytes)."""
    names = sorted(set(WRONG_KINDS) - set(exclude))
    return st.sampled_from(names).map(lambda name: (name, WRONG_KINDS[name]()))


SPECIALS = {
    "a directory in place of the file": Special("directory"),
    "a dangling symbolic link in place of the file": Special("dangling"),
}
"""Paths that are not plain files (no read permission: ``unreadable``, run as another user)."""


def special() -> st.SearchStrategy[tuple[str, Special]]:
    return st.sampled_from(sorted(SPECIALS)).map(lambda name: (name, SPECIALS[name]))


def unreadable(content: bytes) -> Special:
    """``content`` in a file of mode 000, which a case run as another user may not read."""
    return Special("unreadable", content)


def huge(unit: bytes, target_bytes: int) -> Huge:
    """``unit`` repeated to about ``target_bytes`` (bounded by the surface, so that the case stays fast)."""
    return Huge(unit, max(1, target_bytes // max(len(unit), 1)))
