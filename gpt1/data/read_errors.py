"""What is wrong with a data file that does not read, in one line naming the file and the line: the first line of a
JSON Lines file that is not a JSON object (``json_error``), the first invalid UTF-8 byte (``utf8_error``); and the
invalid UTF-8 of a plain-text file, counted (``invalid_utf8``) and warned of (``warn_invalid_utf8``).

Invalid UTF-8. A .txt file is plain text: its invalid bytes are replaced with U+FFFD and counted, and a warning names
the file, how many were replaced and the byte offset of the first (a stray byte in a large corpus should not stop a
run). A structured file (.jsonl/.json, .csv, .tsv) must be valid UTF-8: an invalid byte is a ``DataError`` naming
the file, its line and the byte offset (``gpt1.data.sources.read_error``), since a replaced byte inside a quoted field
or a key may change what the row says.
"""

from __future__ import annotations

import codecs
import json
import logging
import os
from pathlib import Path
from typing import Optional

log = logging.getLogger(__name__)


def json_error(path: str | os.PathLike) -> Optional[str]:
    """``"path:line: what is wrong"`` for the first line of a JSON Lines file that is not a JSON object (for a file
    holding one JSON array: where it fails to parse), or its first invalid UTF-8 byte; None if it is well formed."""
    data = Path(path).read_bytes()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return utf8_error(path)
    if text.lstrip().startswith("["):
        try:
            json.loads(text)
        except json.JSONDecodeError as e:
            return f"{path}:{e.lineno}: not valid JSON ({e.msg}, column {e.colno}): fix the file"
        return None
    for lineno, line in enumerate(text.split("\n"), 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as e:
            return f"{path}:{lineno}: not valid JSON ({e.msg}, column {e.colno}): fix or remove the line"
        if not isinstance(record, dict):
            return f"{path}:{lineno}: not a JSON object (JSON Lines: one object per line, columns as keys)"
    return None


def utf8_error(path: str | os.PathLike) -> Optional[str]:
    """``"path:line: invalid UTF-8 (byte N of the file)"`` for the first invalid byte of ``path``, or None."""
    data = Path(path).read_bytes()
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        return f"{path}:{line}: invalid UTF-8 (byte {e.start} of the file): save it as UTF-8"
    return None


def invalid_utf8(path: str | os.PathLike, block: int = 1 << 20) -> tuple[int, Optional[int]]:
    """(how many invalid UTF-8 sequences ``path`` holds, the byte offset of the first or None): each becomes one
    U+FFFD when decoded with errors="replace". Reads ``block`` bytes at a time (a corpus file may be larger than
    memory)."""
    first, done, pending = None, 0, b""  # bytes checked before ``pending``, the incomplete sequence at a block's end
    with open(path, "rb") as f:
        while first is None:
            data = f.read(block)
            try:
                _, used = codecs.utf_8_decode(pending + data, "strict", not data)
            except UnicodeDecodeError as e:
                first = done + e.start
                break
            done, pending = done + used, (pending + data)[used:]
            if not data:
                return 0, None
        # Every U+FFFD of the replaced text is an invalid sequence, except those written as such (bytes EF BF BD,
        # always decoded as one character: EF cannot continue a sequence).
        f.seek(0)
        decoder, replaced, tail = codecs.getincrementaldecoder("utf-8")("replace"), 0, b""
        while data := f.read(block):
            replaced += decoder.decode(data).count("\ufffd") - (tail + data).count(b"\xef\xbf\xbd")
            tail = (tail + data)[-2:]  # a written U+FFFD across two blocks (never counted twice: it needs three bytes)
        replaced += decoder.decode(b"", True).count("\ufffd")
    return replaced, first


def warn_invalid_utf8(path: str | os.PathLike) -> None:
    """A warning naming ``path``, how many invalid UTF-8 sequences it holds and where the first is; none if none."""
    count, first = invalid_utf8(path)
    if count:
        log.warning(
            "%s: %d invalid UTF-8 byte sequence%s replaced with U+FFFD (the first at byte %d of the file)",
            path,
            count,
            "" if count == 1 else "s",
            first,
        )
