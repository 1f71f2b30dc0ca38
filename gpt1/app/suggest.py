"""What to do about a configuration mistake that Hydra or OmegaConf reports in its own words: the one line
``gpt1.app.runner.user_message`` prints instead, naming the culprit and the fix, with the closest valid name for a
misspelt one."""

from __future__ import annotations

import dataclasses
import difflib
import os
import re
import shlex
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Optional

from hydra.errors import MissingConfigException, OverrideParseException
from omegaconf.errors import ConfigAttributeError, ConfigKeyError, MissingMandatoryValue, OmegaConfBaseException

from gpt1.core.errors import exception_chain

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


def _yaml_of(config_path: str, key: Optional[str] = None) -> Optional[Path]:
    """The YAML file ``config_path`` (``task/mine``) that Hydra read: the one holding ``key`` where several could."""
    files = [d / f"{config_path}.yaml" for d in config_dirs() if (d / f"{config_path}.yaml").is_file()]
    pattern = re.compile(rf"^\s*{re.escape(key or '')}\s*:", re.MULTILINE)
    return next(
        (f for f in files if key is None or pattern.search(f.read_text(encoding="utf-8", errors="replace"))),
        files[0] if files else None,
    )


def _fields(schema: Any) -> list[str]:
    return [f.name for f in dataclasses.fields(schema)] if dataclasses.is_dataclass(schema) else []


def _swept(key: str) -> Optional[str]:
    """``key=a,b,...`` when the command line sweeps ``key`` (a comma-separated value or a sweep function)."""
    for arg in sys.argv[1:]:
        name, _, value = arg.partition("=")
        if name.lstrip("+~") == key and ("," in value or re.match(r"(choice|range|glob)\(", value)):
            return arg
    return None


_WANTED = [
    ("could not be converted to Integer", "an integer (e.g. {key}=3)"),
    ("could not be converted to Float", "a number (e.g. {key}=0.5)"),
    ("is not a valid bool", "true or false"),
    ("is not a ListConfig, list or tuple", "a list (e.g. {key}=[a,b])"),
    ("Cannot merge DictConfig with ListConfig", "a list (e.g. {key}=[a,b])"),
    ("is not a valid input for <enum", "one of {values}"),
    ("expected one of", "one of them"),
    ("Cannot assign", "a value of its type (`--cfg job` prints every key and its value)"),
    ("is not a subclass of", "a mapping of its fields (key: value lines indented below it)"),
    ("is not Optional", "a value: it cannot be null (`--cfg job` prints every key and its value)"),
    ("Incompatible value 'None'", "a value: it cannot be null (`--cfg job` prints every key and its value)"),
]
"""OmegaConf's words for a value of the wrong type -> what to give instead."""


def given_with(cause: BaseException) -> str | None:
    """The key of the override that holds a missing interpolation (``paths.cache_dir=${oops}``), where OmegaConf
    names the key it was resolving (``data.train_files[0]``, through ``${paths.cache_dir}``)."""
    found = re.search(r"Interpolation key '([^']+)' not found", str(cause))
    if type(cause).__name__ != "InterpolationKeyError" or not found:
        return None
    return next((a.split("=", 1)[0].lstrip("+~") for a in sys.argv[1:] if "${" + found.group(1) in a), None)


def what_to_give(cause: BaseException, first: str, key: Any) -> str:
    """The advice that ends OmegaConf's line on a value of the wrong type (``: give KEY ...``), a missing
    interpolation's (``: name a key that exists ...``); "" for its other errors."""
    if type(cause).__name__ == "InterpolationKeyError":
        return ": ${...} names another key of the config: name one that exists (`--cfg job` prints every key)"
    wanted = next((want for words, want in _WANTED if words in first), None)
    if wanted is None:
        return ""
    enum = getattr(cause, "ref_type", None)
    values = ", ".join(m.name for m in enum) if isinstance(enum, type) and hasattr(enum, "__members__") else ""
    return f": give {key or 'it'} " + wanted.format(key=key or "KEY", values=values or "its values")


def config_hint(e: BaseException) -> Optional[str]:
    """The one line for a configuration mistake Hydra or OmegaConf raised, or None when it is not one of those
    this module knows (``gpt1.app.runner.user_message`` then says it its own way)."""
    chain = exception_chain(e)
    omega = next((c for c in chain if isinstance(c, OmegaConfBaseException)), None)
    text = str(e)
    for hint in (_parse_hint(chain), _ambiguous_hint(text), _group_hint(chain, text), _merge_hint(omega, text)):
        if hint is not None:
            return hint
    if isinstance(e, AssertionError) and "Unexpected type for root: NoneType" in text:
        return _below_null()
    found = re.match(r"Additional config directory '(.*)' not found", text)
    if found:
        return (
            f"--config-dir {found.group(1)}: no such directory: give the folder that holds your YAML files (task/, "
            "experiment/, ...)"
        )
    unloadable = re.match(r"In '([\w/]+)': Could not load '([^']*)'", text)
    if unloadable:  # a defaults entry of a config directory's YAML that names no config (cut short, misspelt)
        where = _yaml_of(unloadable.group(1), "defaults") or f"{unloadable.group(1)}.yaml"
        return (
            f"{where}: its defaults list names {unloadable.group(2)!r}, which no config directory holds: fix that "
            "entry (GROUP: NAME, or override /GROUP: NAME in an experiment) or remove it"
        )
    composing = re.match(r"In '([\w/]+)': \w+ raised while composing config", text)
    if composing and "/" in composing.group(1) and "Merge error:" in text:
        return _merge_error(composing.group(1), text)
    if composing and "/" in composing.group(1) and omega is not None and getattr(omega, "full_key", None):
        if not isinstance(omega, (ConfigKeyError, ConfigAttributeError)):  # a value of the wrong type in a YAML file
            key = str(omega.full_key)
            path = _yaml_of(composing.group(1), key.rsplit(".", 1)[-1]) or f"{composing.group(1)}.yaml"
            first = str(omega).splitlines()[0]
            return f"{path}: {key}: {first}{what_to_give(omega, first, key)}"
    deleted = re.match(r"Could not delete from config\. '([^']+)' does not exist", text)
    if deleted:  # ~nokey
        return f"~{deleted.group(1)}: there is no key {deleted.group(1)} to delete (`--cfg job` prints every key)"
    if isinstance(omega, OmegaConfBaseException) and "does not support deletion" in str(omega) and omega.full_key:
        return undeletable(str(omega.full_key))
    if isinstance(omega, (ConfigKeyError, ConfigAttributeError)) and omega.key is not None and "not in" in str(omega):
        return _key_hint(omega, text)
    return None


def _merge_error(config_path: str, text: str) -> str:
    """A field of a config directory's YAML file given a value where its schema has a mapping of fields
    (``zeroshot: verbalizer``): OmegaConf's merge names no key, the file's line with that value does."""
    found = re.search(r"Merge error: (.+?)\. value: (.*)", text)
    what, value = (found.group(1), found.group(2).strip()) if found else ("not a mapping of fields", "")
    path = _yaml_of(config_path)
    line = re.search(rf"^\s*(\w+):\s*{re.escape(value)}\s*$", path.read_text(errors="replace"), re.M) if path else None
    key = line.group(1) if line else "the field"
    return f"{path or config_path + '.yaml'}: {key}: {what}{what_to_give(None, 'is not a subclass of', key)}"


def _parse_hint(chain: list[BaseException]) -> Optional[str]:
    """An override Hydra cannot parse: ``++task.splits.train=train[:1000]`` (bash removed the quotes), ``top_k``."""
    parse = next((c for c in chain if isinstance(c, OverrideParseException)), None)
    if parse is None or not parse.override:
        return None
    key, equals, value = str(parse.override).partition("=")
    if not equals:  # a key alone (a flag given without its dashes, or a value forgotten)
        return f"{key}: Hydra cannot parse this override: an override is key=value: give {key}=VALUE"
    detail = str(parse).splitlines()[0]
    return (
        f"{parse.override}: Hydra cannot parse this override ({detail}): close its brackets and quotes; a value "
        f"holding [ ] : , ( ) or spaces is a string in double quotes inside the shell's single quotes: "
        f"'{key}=\"{value}\"'"
    )


def _ambiguous_hint(text: str) -> Optional[str]:
    """prompt="It was a dark night, and she said": bash removed the quotes, Hydra reads a comma as a sweep."""
    found = re.fullmatch(r"Ambiguous value for argument '([^=']+)=(.*)'", text.split("\n", 1)[0])
    if not found:
        return None
    key, value = found.groups()
    return (
        f"{key}={value}: Hydra reads a comma as a list of values to sweep; a value holding a comma (or [ ] : ( ) "
        f"spaces) is a string in double quotes inside the shell's single quotes: '{key}=\"{value}\"' (a sweep: -m "
        f"{key}=a,b)"
    )


def _group_hint(chain: list[BaseException], text: str) -> Optional[str]:
    """An option no config group has (task=sentimnt, experiment=ablation_auxlm, model=smal), or a group the command
    does not have (gpt1 pretrain task=sentiment)."""
    missing = next((c for c in chain if isinstance(c, MissingConfigException)), None)
    found = re.search(r"Could not find '([\w/]+)/([^'/]+)'", text)
    if missing is not None and found:
        group, value = found.groups()
        return no_such_option(group, value, list(missing.options or []) or group_options(group))
    found = re.match(r"Could not override '([\w.]+)'\. No match in the defaults list", text)
    if not found:
        return None
    group, command = found.group(1), command_name()
    value = next((a.split("=", 1)[1] for a in sys.argv[1:] if a.split("=", 1)[0] == group), "NAME")
    if group == "task" and command in TAKES_NO_TASK:
        return f"task={value}: gpt1 {command} takes no task; {TAKES_NO_TASK[command].format(value=value)}"
    return f"{group}={value}: gpt1 {command} has no config group {group!r} (`--cfg job` prints its config)"


def no_such_option(group: str, value: str, options: list[str]) -> str:
    """The line for ``group=value`` where the group has no such option (its ``options``)."""
    found = [p for d in config_dirs() if os.path.lexists(p := d / group / f"{value}.yaml") and not p.is_file()]
    if found:  # a directory or a broken link by the option's name: Hydra sees no file
        what = "a directory" if found[0].is_dir() else "a broken symbolic link"
        return f"{group}={value}: {found[0]} is {what}, not a YAML file: put the {group}'s YAML file there"
    return (
        f"{group}={value}: there is no {group} {value!r}{_did_you_mean(value, options, f'{group}=')} "
        f"(its options: {', '.join(options)}): choose one of them, or write your own as DIR/{group}/{value}.yaml "
        "and give --config-dir DIR"
    )


def group_options(group: str) -> list[str]:
    """The options of the config group ``group``: the YAML files of every config directory (``--config-dir`` and the
    package's) and the configs stored in Hydra's ConfigStore (the model presets, a task given to ``compose``)."""
    from hydra.core.config_store import ConfigStore

    node = ConfigStore.instance().repo
    for part in group.split("/"):
        node = node.get(part, {}) if isinstance(node, dict) else {}
    stored = {name.removesuffix(".yaml") for name in node} if isinstance(node, dict) else set()
    files = {p.stem for d in config_dirs() for p in (d / group).glob("*.yaml") if p.is_file()}
    return sorted(files | stored)


def _merge_hint(omega: Optional[OmegaConfBaseException], text: str) -> Optional[str]:
    """A value missing: a required key not given (gpt1 evaluate without ckpt=), or ++task.x=... while task is swept
    or not given."""
    if not isinstance(omega, MissingMandatoryValue):
        return None
    merging = re.match(r"Error merging override (\S+)", text)
    if merging:
        override, group = merging.group(1), str(omega.full_key or "").split(".")[0]
        sweep = _swept(group)
        if sweep:
            return (
                f"{override}: a {group}.* override cannot be merged while {group} is swept ({sweep}): Hydra "
                f"composes a sweep's config once without its swept groups; run one command per {group} "
                f"({group}=NAME {override}), or set the key in each {group}'s YAML (--config-dir)"
            )
        return f"{override}: there is no {group} to merge it into: give {group}=NAME first"
    if omega.full_key:
        key = str(omega.full_key)
        return f"{key} is required: give {key}=... on the command line (`--cfg job` prints every key)"
    return None


def _key_hint(omega: OmegaConfBaseException, text: str) -> str:
    """A key no schema has: misspelt on the command line or in a task YAML file, or deleted (~key) though the
    schema needs it."""
    key, fields = str(omega.key), _fields(omega.object_type)
    full_key = str(omega.full_key or key)
    if f"~{full_key}" in sys.argv[1:] or any(a.startswith(f"~{full_key}=") for a in sys.argv[1:]):
        return undeletable(full_key)
    parent = full_key[: -len(key)] if full_key.endswith(key) else ""
    schema = getattr(omega.object_type, "__name__", "the config")
    composing = re.match(r"In '([\w/]+)': \w+ raised while composing config", text)
    if composing and "/" in composing.group(1):  # a field of a group's YAML file (a task of the user's)
        config_path = composing.group(1)
        no_header = full_key == config_path.rsplit("/", 1)[0].replace("/", ".")  # its keys under the group's name
        where = _yaml_of(config_path, None if no_header else key) or f"{config_path}.yaml"
        if no_header:
            return (
                f"{where}: its keys are the command's own, but it has no '# @package _global_' line: put that line "
                "first"
            )
        return (
            f"{where}: unknown field {key!r} ({schema}){_did_you_mean(key, fields)} (its fields: {', '.join(fields)}): "
            "rename it to one of them, or remove it"
        )
    if omega.object_type is dict and typed(full_key) is not None:  # a mapping of the user's own keys
        return (
            f"{full_key}: not in the config; {parent.rstrip('.')} takes keys of your own, added with ++ (or +, "
            f"which refuses a key that is there): type {retyped(full_key, full_key, '++')} in place of "
            f"{retyped(full_key, full_key)}"
        )
    first = str(omega).splitlines()[0]  # Key 'n_layr' not in 'GPTConfig'
    return f"{full_key}: {first}{key_hint(key, fields, parent)} (`--cfg job` prints every key)"


def undeletable(key: str) -> str:
    """The line for ``~key`` of a key a schema declares (Hydra deletes it; the run would fail where it is read, or
    run without it where it is not)."""
    return (
        f"~{key}: {key} is a key of gpt1 {command_name()}'s config and cannot be deleted: set it instead "
        f"({key}=...; `--cfg job` prints every key and its value)"
    )


def _below_null() -> str:
    """An override of a key below a config group that is null (gpt1 evaluate task.metrics=[...] without task=NAME),
    which OmegaConf's update asserts against: the first override below a group that the command's config leaves
    null (its defaults list's ``- GROUP: null``) and the command line does not choose."""
    import gpt1.conf

    primary = Path(gpt1.conf.__file__).parent / f"{command_name()}.yaml"
    text = primary.read_text() if primary.is_file() else ""
    nulls = set(re.findall(r"^\s*-\s*(?:optional\s+)?(\w+):\s*null\b", text, re.MULTILINE))
    overrides = [a for a in sys.argv[1:] if "=" in a and not a.startswith("-")]
    given = {a.split("=", 1)[0].lstrip("+~") for a in overrides}
    for override in overrides:
        key = override.split("=", 1)[0].lstrip("+~")
        head = key.split(".")[0]
        if "." in key and head in nulls and head not in given:
            return f"{override}: {head} is null here, so it has no {key}: give {head}=NAME first (or leave {key} out)"
    return "an override sets a key below a config that is null: give that config first (`--cfg job` prints it)"
