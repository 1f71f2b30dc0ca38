"""What to do about a configuration mistake that Hydra or OmegaConf reports in its own words: the one line
``gpt1.app.runner.user_message`` prints instead, naming the culprit and the fix, with the closest valid name for a
misspelt one (a config key, a task YAML field, a config group, a task or experiment name).

    closest("lable", ["label", "label_names", "text"])    # -> "label"
"""

from __future__ import annotations

import dataclasses
import difflib
import re
import shlex
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Optional

from hydra.errors import MissingConfigException, OverrideParseException
from omegaconf.errors import ConfigAttributeError, ConfigKeyError, MissingMandatoryValue, OmegaConfBaseException

TAKES_NO_TASK = {
    "pretrain": "pre-training reads a corpus (data=...), not a task: fine-tune on a task with gpt1 finetune "
    "task={value} init_from=CKPT",
    "generate": "it samples from a checkpoint: score a task with gpt1 evaluate ckpt=CKPT task={value}",
    "convert": "it converts a checkpoint: fine-tune on a task with gpt1 finetune task={value} init_from=CKPT",
}
"""Command -> what to say of task=NAME given to a command that takes no task."""


def closest(name: str, options: Iterable[str]) -> Optional[str]:
    """The option most like ``name`` (difflib's ratio of at least 0.6; a case-insensitive match first), or None."""
    options = list(options)
    for option in options:
        if option.lower() == name.lower():
            return option
    found = difflib.get_close_matches(name, options, n=1, cutoff=0.6)
    return found[0] if found else None


def _did_you_mean(name: str, options: Iterable[str], prefix: str = "") -> str:
    best = closest(name, options)
    return f"; did you mean {prefix}{best}?" if best else ""


def typed(key: str) -> Optional[tuple[str, str]]:
    """How the command line overrides ``key``: its mark (``+``, ``++``, ``~`` or none) and its value as the shell
    passed it, or None where it does not."""
    for arg in sys.argv[1:]:
        name, eq, value = arg.partition("=")
        if eq and name.lstrip("+~") == key:
            return name[: len(name) - len(name.lstrip("+~"))], value
    return None


def retyped(key: str, new_key: str, mark: Optional[str] = None) -> Optional[str]:
    """The command line's override of ``key`` with ``new_key`` in its place (and ``mark``: ``++``, ...; None: its
    own), quoted for the shell, so that typed in its place it gives Hydra the same value; None where the command line
    does not override ``key``."""
    found = typed(key)
    if found is None:
        return None
    own, value = found
    return shlex.quote(f"{own if mark is None else mark}{new_key}={value}")


def key_hint(key: str, options: Iterable[str], parent: str = "") -> str:
    """The closest of ``options`` to the misspelt ``key`` (under ``parent``, e.g. "model."), with the value the
    command line gave it, ready to type in its place (a key of a schema, set without a + or ++): "; did you mean
    model.n_layer=3?"; "" where none is close."""
    best = closest(key, options)
    if best is None:
        return ""
    return f"; did you mean {retyped(parent + key, parent + best, '') or parent + best}?"


def command_name() -> str:
    """The running gpt1 command: ``gpt1 finetune ...`` (the console script) or ``python -m gpt1.commands.finetune``."""
    return Path(sys.argv[0].split()[-1]).stem if sys.argv and sys.argv[0] else ""


def config_dirs() -> list[Path]:
    """Where Hydra looks for configs: ``--config-dir DIR`` (``-cd``) of the command line first, then the package's."""
    dirs, argv = [], sys.argv[1:]
    for i, arg in enumerate(argv):
        if arg in ("--config-dir", "-cd") and i + 1 < len(argv):
            dirs.append(Path(argv[i + 1]))
        elif arg.startswith("--config-dir="):
            dirs.append(Path(arg.split("=", 1)[1]))
    import gpt1.conf  # the package's configs (conf/ of the checkout, shipped inside the package)

    return [*dirs, Path(gpt1.conf.__file__).parent]


def _yaml_of(config_path: str, key: str) -> Optional[Path]:
    """The YAML file ``config_path`` (``task/mine``) that Hydra read, the one holding ``key`` where several could."""
    files = [d / f"{config_path}.yaml" for d in config_dirs() if (d / f"{config_path}.yaml").is_file()]
    pattern = re.compile(rf"^\s*{re.escape(key)}\s*:", re.MULTILINE)
    return next(
        (f for f in files if pattern.search(f.read_text(encoding="utf-8", errors="replace"))),
        files[0] if files else None,
    )


def _fields(schema: Any) -> list[str]:
    return [f.name for f in dataclasses.fields(schema)] if dataclasses.is_dataclass(schema) else []


def _group_options(group: str) -> list[str]:
    return sorted({p.stem for d in config_dirs() for p in (d / group).glob("*.yaml")})


def _chain(e: BaseException) -> list[BaseException]:
    """``e`` and its causes (and contexts: Hydra re-raises OmegaConf's errors inside ``except``)."""
    chain: list[BaseException] = []
    while e is not None and e not in chain:
        chain.append(e)
        e = e.__cause__ or e.__context__
    return chain


def _swept(key: str) -> Optional[str]:
    """``key=a,b,...`` when the command line sweeps ``key`` (a comma-separated value or a sweep function)."""
    for arg in sys.argv[1:]:
        name, _, value = arg.partition("=")
        if name.lstrip("+~") == key and ("," in value or re.match(r"(choice|range|glob)\(", value)):
            return arg
    return None


def config_hint(e: BaseException) -> Optional[str]:
    """The one line for a configuration mistake Hydra or OmegaConf raised, or None when it is not one of those
    this module knows (``gpt1.app.runner.user_message`` then says it its own way)."""
    chain = _chain(e)
    omega = next((c for c in chain if isinstance(c, OmegaConfBaseException)), None)
    text = str(e)

    parse = next((c for c in chain if isinstance(c, OverrideParseException)), None)
    if parse is not None and parse.override:  # ++task.splits.train=train[:1000]: bash removed the quotes
        key, _, value = str(parse.override).partition("=")
        detail = str(parse).splitlines()[0]
        return (
            f"{parse.override}: Hydra cannot parse this override ({detail}); a value holding [ ] : , ( ) or "
            f"spaces is a string in double quotes inside the shell's single quotes: '{key}=\"{value}\"'"
        )

    found = re.fullmatch(r"Ambiguous value for argument '([^=']+)=(.*)'", text.split("\n", 1)[0])
    if found:  # prompt="It was a dark night, and she said": bash removed the quotes, Hydra reads a comma as a sweep
        key, value = found.groups()
        return (
            f"{key}={value}: Hydra reads a comma as a list of values to sweep; a value holding a comma (or [ ] : "
            f"( ) spaces) is a string in double quotes inside the shell's single quotes: '{key}=\"{value}\"' "
            f"(a sweep: -m {key}=a,b)"
        )

    missing = next((c for c in chain if isinstance(c, MissingConfigException)), None)
    found = re.search(r"Could not find '([\w/]+)/([^'/]+)'", text)
    if missing is not None and found:  # task=sentimnt, experiment=ablation_auxlm, model=smal
        group, value = found.groups()
        options = list(missing.options or []) or _group_options(group)
        return (
            f"{group}={value}: there is no {group} {value!r}{_did_you_mean(value, options, f'{group}=')} "
            f"(the {group}s: {', '.join(options)})"
        )

    found = re.match(r"Could not override '([\w.]+)'\. No match in the defaults list", text)
    if found:  # gpt1 pretrain task=sentiment: a config group this command does not have
        group, command = found.group(1), command_name()
        value = next((a.split("=", 1)[1] for a in sys.argv[1:] if a.split("=", 1)[0] == group), "NAME")
        if group == "task" and command in TAKES_NO_TASK:
            return f"task={value}: gpt1 {command} takes no task; {TAKES_NO_TASK[command].format(value=value)}"
        return f"{group}={value}: gpt1 {command} has no config group {group!r} (`--cfg job` prints its config)"

    merging = re.match(r"Error merging override (\S+)", text)
    if merging and isinstance(omega, MissingMandatoryValue):  # ++task.x=... while task is swept, or not given
        override, group = merging.group(1), str(omega.full_key or "").split(".")[0]
        sweep = _swept(group)
        if sweep:
            return (
                f"{override}: a {group}.* override cannot be merged while {group} is swept ({sweep}): Hydra "
                f"composes a sweep's config once without its swept groups; run one command per {group} "
                f"({group}=NAME {override}), or set the key in each {group}'s YAML (--config-dir)"
            )
        return f"{override}: there is no {group} to merge it into: give {group}=NAME first"

    if isinstance(omega, MissingMandatoryValue) and omega.full_key:  # gpt1 evaluate without ckpt=
        key = str(omega.full_key)
        return f"{key} is required: give {key}=... on the command line (`--cfg job` prints every key)"

    if isinstance(omega, (ConfigKeyError, ConfigAttributeError)) and omega.key is not None and "not in" in str(omega):
        return _unknown_key(omega, text)
    return None


def _unknown_key(omega: OmegaConfBaseException, text: str) -> str:
    """The line for a key that is not in the config: a misspelt field of a group's YAML file, a key of one's own in a
    mapping without ++, or a misspelt key (the closest one, with its value)."""
    key, fields = str(omega.key), _fields(omega.object_type)
    full_key = str(omega.full_key or key)
    parent = full_key[: -len(key)] if full_key.endswith(key) else ""
    schema = getattr(omega.object_type, "__name__", "the config")
    composing = re.match(r"In '([\w/]+)': \w+ raised while composing config", text)
    if composing and "/" in composing.group(1):  # a field of a group's YAML file (a task of the user's)
        config_path = composing.group(1)
        path = _yaml_of(config_path, key)
        where = f"{path}" if path else f"{config_path}.yaml"
        return (
            f"{where}: unknown field {key!r} ({schema}){_did_you_mean(key, fields)} (its fields: {', '.join(fields)})"
        )
    if omega.object_type is dict and typed(full_key) is not None:  # a mapping of the user's own keys
        return (
            f"{full_key}: not in the config; {parent.rstrip('.')} takes keys of your own, added with ++ (or +, "
            f"which refuses a key that is there): type {retyped(full_key, full_key, '++')} in place of "
            f"{retyped(full_key, full_key)}"
        )
    first = str(omega).splitlines()[0]  # Key 'n_layr' not in 'GPTConfig'
    return f"{full_key}: {first}{key_hint(key, fields, parent)} (`--cfg job` prints every key)"
