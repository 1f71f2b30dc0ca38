"""What encoding a text file is in, told from its first bytes (``sniff``), and whether gpt1 reads it so
(``read_encoding``).

``sniff``: a byte-order mark says it (UTF-8, UTF-16 and UTF-32, little- or big-endian). Without one, UTF-16 or UTF-32
text whose first 4 KB hold ASCII characters has a NUL byte beside each of them, which UTF-8 text never has (a NUL is
valid UTF-8: such a file would be read as text with a NUL between characters): its encoding is the one that decodes
those bytes to mostly ASCII and no NUL. Anything else is taken as UTF-8.

What is read, by format (``read_encoding``):

- .txt files (a corpus's documents, the BPE's training text, a task's .txt file) are read in the encoding their
  byte-order mark declares, the mark dropped: Python decodes UTF-16 and UTF-32 piece by piece as it decodes UTF-8, so
  a document still streams, and datasets' text builder takes the same codec;
- .jsonl/.json, .csv and .tsv files must be UTF-8 (a UTF-8 byte-order mark is skipped): datasets' builders take one
  encoding for all the files they convert together, its json builder cuts a file into batches at b"\\n" (half a
  UTF-16 line break), and the places gpt1 names in its errors (line, byte offset) are read from the UTF-8 bytes;
- a UTF-16 or UTF-32 file without a byte-order mark is refused whatever its format: its encoding is a guess.

A refusal is a ``DataError`` naming the file, its encoding and the conversion to run (``iconv``). Invalid sequences
in a file that is read (bytes that are not text in its encoding) are replaced with U+FFFD and counted
(``gpt1.data.read_errors.warn_invalid``).
"""

from __future__ import annotations

import codecs
import os
import shlex
from dataclasses import dataclass
from pathlib import Path

from gpt1.core.errors import DataError

SNIFF_BYTES = 4096
"""The first bytes of a file that ``sniff`` reads."""


@dataclass(frozen=True)
class Encoding:
    """A text file's encoding: ``name`` as iconv names it ("UTF-16" where a byte-order mark tells the byte order, else
    "UTF-16LE"...), ``codec`` Python's codec of the bytes after the byte-order mark ``bom`` (b"": none)."""

    name: str
    codec: str
    bom: bytes = b""

    @property
    def file_codec(self) -> str:
        """Python's codec for the whole file, its byte-order mark dropped (what ``open(encoding=...)`` takes)."""
        if not self.bom:
            return self.codec
        return "utf-8-sig" if self.codec == "utf-8" else self.codec[: len("utf-16")]  # (the mark tells the order)

    def __str__(self) -> str:
        if not self.bom:
            return f"{self.name} without a byte-order mark (a NUL byte beside each ASCII character)"
        order = "little" if self.codec.endswith("-le") else "big"
        return f"{self.name} ({order}-endian, by its byte-order mark)"


UTF8 = Encoding("UTF-8", "utf-8")

MARKS = (  # UTF-32 LE's mark first: it starts with UTF-16 LE's
    Encoding("UTF-32", "utf-32-le", codecs.BOM_UTF32_LE),
    Encoding("UTF-32", "utf-32-be", codecs.BOM_UTF32_BE),
    Encoding("UTF-8", "utf-8", codecs.BOM_UTF8),
    Encoding("UTF-16", "utf-16-le", codecs.BOM_UTF16_LE),
    Encoding("UTF-16", "utf-16-be", codecs.BOM_UTF16_BE),
)
UNMARKED = (
    Encoding("UTF-32LE", "utf-32-le"),
    Encoding("UTF-32BE", "utf-32-be"),
    Encoding("UTF-16LE", "utf-16-le"),
    Encoding("UTF-16BE", "utf-16-be"),
)


def sniff(path: str | os.PathLike) -> Encoding:
    """The encoding of the text file ``path``, from its first ``SNIFF_BYTES`` (module docstring)."""
    with open(path, "rb") as f:
        head = f.read(SNIFF_BYTES)
    for encoding in MARKS:
        if head.startswith(encoding.bom):
            return encoding
    if b"\0" not in head:
        return UTF8
    best, most = UTF8, 0
    for encoding in UNMARKED:
        try:
            text = codecs.getincrementaldecoder(encoding.codec)("strict").decode(head)  # (a cut character waits)
        except UnicodeDecodeError:
            continue
        ascii_chars = sum(c < "\x80" for c in text)
        if "\0" not in text and 2 * ascii_chars > len(text) and ascii_chars > most:
            best, most = encoding, ascii_chars
    return best


def read_encoding(path: str | os.PathLike, text: bool) -> Encoding:
    """The encoding ``path`` is read in (a .txt file if ``text``, else a structured one): what ``sniff`` finds where
    gpt1 reads it, else a ``DataError`` naming it and the conversion to run (module docstring)."""
    encoding = sniff(path)
    if encoding.codec == "utf-8" or (text and encoding.bom):
        return encoding
    path = Path(path)
    utf8 = path.with_name(f"{path.stem}.utf8{path.suffix}")
    convert = f"iconv -f {encoding.name} -t UTF-8 {shlex.quote(str(path))} > {shlex.quote(str(utf8))}"
    if not encoding.bom:
        raise DataError(f"{path} looks like {encoding}, not UTF-8: convert it: {convert}")
    raise DataError(f"{path} is {encoding}, but {path.suffix} files must be UTF-8: convert it: {convert}")
