"""A YAML config file of the user's (``--config-dir DIR``'s, a task file given to ``gpt1.api.compose``), checked before
Hydra reads it, so that what Hydra would fail on with a traceback is one line naming the file (and its line) and what
to do: unreadable, of another kind, not UTF-8, not YAML, or not a mapping of keys."""

from __future__ import annotations

import codecs
import os
import re
from pathlib import Path
from typing import Any, Optional

from gpt1.core.errors import ConfigError
from gpt1.core.file_kinds import binary_kind
from gpt1.data.encodings import read_encoding
from gpt1.data.read_errors import utf8_error

_ADVICE = (
    ("'\\t'", "indent with spaces: YAML takes no tabs"),
    ("duplicate key", "give each key once"),
    ("expected ',' or ']'", "close the [ with ]{opened}"),
    ("expected ',' or '}'", "close the {{ with }}{opened}"),
    ("while scanning a quoted scalar", "close the quote{opened}"),
    ("mapping values are not allowed", "put a value that holds ': ' in quotes"),
    ("could not find expected ':'", "give each key a ': ' and its value"),
)
"""PyYAML's words for what it found -> what to do ({opened}: where the unclosed thing opened)."""


def yaml_problem(path: str | os.PathLike, error: Any) -> str:
    """The one line for a YAML file that does not parse (PyYAML's ``MarkedYAMLError``): ``FILE, line N: what the
    parser found: what to do``."""
    mark, opening = getattr(error, "problem_mark", None), getattr(error, "context_mark", None)
    problem = " ".join(str(getattr(error, "problem", None) or error).split())
    context = getattr(error, "context", None)
    found = f"{problem} ({' '.join(context.split())})" if context else problem
    opened = f" opened at line {opening.line + 1}" if opening is not None and mark and opening.line != mark.line else ""
    advice = next((a for words, a in _ADVICE if words in found), "fix the YAML there")
    where = f"{path}, line {mark.line + 1}" if mark is not None else f"{path}"
    return f"{where}: {found}: {advice.format(opened=opened)}"


def check_config_file(path: str | os.PathLike) -> None:
    """Refuse a YAML config file Hydra could not read as a config: a ``ConfigError`` naming it. A path that is not a
    file is left to Hydra (no such config: it names the options)."""
    path = Path(path)
    if not path.is_file():
        return
    try:
        data = path.read_bytes()
    except OSError as e:
        raise ConfigError(f"{path} cannot be read ({e.strerror}): give gpt1 read permission (chmod a+r {path})") from e
    kind = binary_kind(data[:4096])
    if kind is not None:
        raise ConfigError(f"{path} is {kind}, not a YAML config: give a YAML file of keys")
    read_encoding(path, text=False)  # UTF-16 or UTF-32: a DataError with the conversion to run
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        where = utf8_error(path) or f"{path}: invalid UTF-8"
        raise ConfigError(f"{where}: save it as UTF-8") from e
    if data.startswith(codecs.BOM_UTF8) and re.match(r"\s*#\s*@", text):
        raise ConfigError(
            f"{path} starts with a UTF-8 byte-order mark, which hides its first line ({text.splitlines()[0]!r}) from "
            "Hydra: save it without the mark"
        )
    _check_header(path, text[:512])
    top = _parsed(path, text)
    if top is not None and not isinstance(top, dict):
        kind = "a list" if isinstance(top, list) else f"a {type(top).__name__} ({str(top)[:30]!r})"
        raise ConfigError(f"{path} holds {kind}, not a mapping of keys: write it as key: value lines")
    if isinstance(top, dict) and top.get("defaults") is not None:
        _check_defaults(path, top["defaults"])


def _check_defaults(path: Path, defaults: Any) -> None:
    """A defaults list as Hydra takes it: a list of names (``_self_``, ``override /GROUP: NAME`` as a mapping) and
    one-key mappings of a group to an option, a list of options or null."""
    if not isinstance(defaults, list):
        raise ConfigError(f"{path}: defaults is not a list: write it as lines of '- GROUP: NAME' below 'defaults:'")
    for entry in defaults:
        fine = isinstance(entry, str) or (
            isinstance(entry, dict)
            and len(entry) == 1
            and all(isinstance(v, (str, list, type(None))) for v in entry.values())
        )
        if not fine:
            raise ConfigError(
                f"{path}: the defaults entry {entry!r} is not a config's name: write '- GROUP: NAME' (in an "
                "experiment, '- override /GROUP: NAME') or remove it"
            )


def _check_header(path: Path, head: str) -> None:
    """The header Hydra reads before the YAML: leading comment lines ``# @KEY VALUE`` (``# @package _global_``), one
    value each, before any other line (Hydra reads no header line after one)."""
    header = True
    for number, line in enumerate(head.splitlines(), 1):
        if not line.strip():
            continue
        is_header = re.match(r"\s*#\s*@", line)
        header = header and bool(is_header)
        if is_header and not header:
            raise ConfigError(
                f"{path}, line {number}: {line.strip()!r} comes after other lines, where Hydra does not read it: "
                "move it to the top of the file"
            )
        if not is_header:
            continue
        words = line.strip().lstrip("#").split()
        if len(words) != 2:
            raise ConfigError(
                f"{path}, line {number}: {line.strip()!r} is a header line (# @KEY VALUE), which takes one value: "
                f"write it as '# {words[0]} VALUE' (e.g. # @package _global_), a note on a line of its own"
            )


def _parsed(path: Path, text: str) -> Optional[Any]:
    """``text`` read as YAML (the top level), as Hydra reads it (a key given twice is an error, as in OmegaConf's
    loader); a ``ConfigError`` with the file and line where it does not parse."""
    import yaml

    class Loader(yaml.SafeLoader):
        def construct_mapping(self, node: Any, deep: bool = False) -> Any:
            seen = set()
            for key_node, _ in node.value:
                key = self.construct_object(key_node, deep=deep)
                if key in seen:
                    raise yaml.constructor.ConstructorError(
                        "while constructing a mapping",
                        node.start_mark,
                        f"found duplicate key {key}",
                        key_node.start_mark,
                    )
                seen.add(key)
            return super().construct_mapping(node, deep=deep)

    try:
        return yaml.load(text, Loader=Loader)  # noqa: S506 (a safe loader)
    except yaml.YAMLError as e:  # (a character YAML does not take, e.g. NUL, has no line: its position)
        raise ConfigError(yaml_problem(path, e)) from e
