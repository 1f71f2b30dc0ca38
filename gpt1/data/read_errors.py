"""What is wrong with a data file that does not read, in one line naming the file and the line (``json_error``,
``utf8_error``); a .txt file's invalid sequences counted and warned of (``warn_invalid``): a stray byte in a large
corpus should not stop a run, while in a structured file (an error there) it may change what a row says.
"""

from __future__ import annotations

import codecs
import json
import logging
import os
from pathlib import Path
from typing import Optional

from gpt1.data.encodings import UTF8, Encoding

log = logging.getLogger(__name__)


def json_error(path: str | os.PathLike) -> Optional[str]:
    """``"path:line: what is wrong"`` for the first line of a JSON Lines file that is not a JSON object (for a file
    holding one JSON array: where it fails to parse), or its first invalid UTF-8 byte; None if it is well formed."""
    data = Path(path).read_bytes()
    try:
        text = data.decode("utf-8-sig")
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
            return (
                f"{path}:{lineno}: not a JSON object (JSON Lines: one object per line, columns as keys): write the "
                "line as an object, or remove it"
            )
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


def invalid_sequences(
    path: str | os.PathLike, encoding: Encoding = UTF8, block: int = 1 << 20
) -> tuple[int, Optional[int]]:
    """(how many invalid sequences ``path`` holds in ``encoding``, the byte offset of the first or None): each becomes
    one U+FFFD when decoded with errors="replace". Reads ``block`` bytes at a time (a corpus file may be larger than
    memory)."""
    first = None
    with open(path, "rb") as f:
        f.seek(len(encoding.bom))
        decoder, done = codecs.getincrementaldecoder(encoding.codec)("strict"), len(encoding.bom)
        while first is None:
            data = f.read(block)
            pending = len(decoder.getstate()[0])  # bytes of a character cut at the last block's end
            try:
                decoder.decode(data, final=not data)
            except UnicodeDecodeError as e:
                first = done - pending + e.start
                break
            done += len(data)
            if not data:
                return 0, None
        # Every U+FFFD of the replaced text is an invalid sequence, less those written as such (which "ignore" keeps).
        f.seek(len(encoding.bom))
        replaced, ignored = (codecs.getincrementaldecoder(encoding.codec)(errors) for errors in ("replace", "ignore"))
        count = 0
        while data := f.read(block):
            count += replaced.decode(data).count("\ufffd") - ignored.decode(data).count("\ufffd")
        count += replaced.decode(b"", True).count("\ufffd") - ignored.decode(b"", True).count("\ufffd")
    return count, first


def warn_invalid(path: str | os.PathLike, encoding: Encoding = UTF8) -> None:
    """A warning naming ``path``, how many invalid sequences of ``encoding`` it holds (replaced with U+FFFD when it
    is read) and where the first is; none if none."""
    count, first = invalid_sequences(path, encoding)
    if count:
        log.warning(
            "%s: %d invalid %s byte sequence%s replaced with U+FFFD (the first at byte %d of the file)",
            path,
            count,
            encoding.name,
            "" if count == 1 else "s",
            first,
        )
