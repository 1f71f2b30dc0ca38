"""The overrides of every Hydra command (``key=value`` on the command line): unknown keys (with and without ``+``),
values of the wrong type, values out of their schema field's range, malformed overrides (unbalanced brackets and
quotes, no key, no value, a missing interpolation), config groups and their options, and valid values that run.

The keys come from each command's composed config (``gpt1.api.compose``: the public face, which follows the schemas
as they change): a leaf's type and a field's declared range (``gpt1.core.errors.ranged``) decide the verdict before
the case runs. Valid values are drawn only for the keys of ``SAFE``, whose values in the drawn ranges are known to
run in seconds; any other key is given only values that its type or range refuses.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import string
from typing import Any, Optional

from hypothesis import strategies as st

from tests.fuzz.harness import Expect
from tests.fuzz.world import BASES, Recipe

COMPOSE_WITH = {
    "generate": ["ckpt=x"],
    "evaluate": ["ckpt=x"],
    "pretrain": [],
    "prepare": [],
    "finetune": ["task=sentiment", "init_from=x"],
    "zeroshot": ["task=sentiment", "ckpts=[x]"],
    "convert": ["direction=to-hf", "src=x", "dst=y"],
}
"""What each command needs to compose (its required keys); its leaves are the same whatever the values."""

GROUPS = {
    "pretrain": ["model", "tokenizer", "data", "trainer", "logger", "callbacks", "experiment", "debug"],
    "prepare": ["model", "tokenizer", "data", "trainer", "logger", "callbacks", "experiment", "debug"],
    "finetune": ["task", "model", "trainer", "logger", "callbacks", "experiment", "debug"],
    "evaluate": ["task", "data", "trainer"],
    "zeroshot": ["task", "experiment"],
    "generate": [],
    "convert": [],
}
"""The config groups of each command (conf/<command>.yaml's defaults)."""

FOREIGN_GROUPS = {
    "generate": ["model=tiny", "task=sentiment", "data=files"],
    "convert": ["model=tiny", "task=sentiment"],
    "pretrain": ["task=sentiment"],
    "prepare": ["task=sentiment"],
}
"""Group options of groups a command does not have."""

words = st.text(string.ascii_lowercase, min_size=2, max_size=8)
floats = st.floats(0, 1, allow_nan=False, allow_infinity=False)
SAFE: dict[str, dict[str, st.SearchStrategy[str]]] = {
    "generate": {
        "temperature": floats.map(repr),
        "top_k": st.one_of(st.integers(1, 50).map(str), st.just("null")),
        "max_new_tokens": st.integers(1, 6).map(str),
        "num_samples": st.integers(1, 3).map(str),
        "seed": st.integers(0, 2**31).map(str),
        "use_cache": st.sampled_from(["true", "false"]),
        "prompt": words,
        "device": st.sampled_from(["cpu", "auto"]),
    },
    "evaluate": {
        "data.batch_size": st.integers(1, 8).map(str),
        "data.max_valid_windows": st.integers(1, 4).map(str),
        "seed": st.integers(0, 99).map(str),
        "lm_loss": st.sampled_from(["chunked", "whole"]),
    },
    "pretrain": {
        "seed": st.integers(0, 2**31).map(str),
        "optim.lr": st.floats(0, 1e-2, allow_nan=False).map(repr),
        "optim.weight_decay": st.floats(0, 0.1, allow_nan=False).map(repr),
        "optim.warmup_steps": st.integers(0, 5).map(str),
        "data.batch_size": st.integers(1, 8).map(str),
        "trainer.max_steps": st.integers(1, 3).map(str),
        "model.embd_pdrop": st.floats(0, 0.5, allow_nan=False).map(repr),
        "callbacks.throughput": st.sampled_from(["true", "false"]),
        "lm_loss": st.sampled_from(["chunked", "whole"]),
    },
    "prepare": {
        "seed": st.integers(0, 99).map(str),
        "tokenizer.vocab_size": st.integers(290, 400).map(str),
        "tokenizer.min_frequency": st.integers(0, 3).map(str),
        "data.separate_documents": st.sampled_from(["true", "false"]),
    },
    "finetune": {
        "seed": st.integers(0, 2**31).map(str),
        "optim.lr": st.floats(0, 1e-3, allow_nan=False).map(repr),
        "head_pdrop": st.floats(0, 0.5, allow_nan=False).map(repr),
        "aux_lm_weight": st.floats(0, 1, allow_nan=False).map(repr),
        "batch_size": st.integers(1, 8).map(str),
        "share_context": st.sampled_from(["true", "false"]),
    },
    "zeroshot": {
        "seed": st.integers(0, 99).map(str),
        "batch_size": st.integers(1, 8).map(str),
        "device": st.sampled_from(["cpu", "auto"]),
    },
    "convert": {},
}
"""Command -> key -> valid values known to run in seconds with the command's ``BASES`` line."""

VOCABULARY = {
    "device",
    "trainer.precision",
    "trainer.strategy",
    "trainer.accelerator",
    "model.activation",
    "model.embd_dropout",
    "trainer.max_time",
    "direction",
}
"""String keys whose values gpt1 checks against a list (a word that is none of them is refused)."""

WRONG_TYPE = {
    "IntegerNode": ["abc", "1.5", "1e3", "[1]", "{a: 1}", "''"],
    "FloatNode": ["abc", "[0.1]", "{a: 1}", "''", "1.2.3"],
    "BooleanNode": ["maybe", "2.5", "[true]", "{a: 1}", "''", "nope"],
    "EnumNode": ["zzbogus", "1.5", "[a]"],
    "ListConfig": ["abc", "{a: 1}", "[[1, 2]]"],
}
"""Values each kind of typed leaf refuses (OmegaConf: an int leaf takes an int or a string of one, a bool leaf also
any int; these are none of those)."""

MALFORMED = ["[1,2", "'abc", '"abc', "{a:", "(1", "${", "${oops}", "a]", "1)", "[1,,2]", "'a'b'", "{a: [1}"]
"""Values Hydra cannot parse, or whose interpolation names no key."""


@dataclasses.dataclass(frozen=True)
class Leaf:
    key: str
    kind: str
    """The node's class (IntegerNode, FloatNode, BooleanNode, EnumNode, StringNode, AnyNode, ListConfig)."""
    optional: bool
    bounds: Optional[dict[str, float]]
    typed: bool
    """Whether its field declares a type (a list of ``Any`` takes a string in its place)."""


@functools.cache
def leaves(command: str) -> tuple[tuple[Leaf, ...], tuple[str, ...]]:
    """The leaves of ``command``'s composed config, and its nodes typed by a schema (where a new key is unknown)."""
    from omegaconf import DictConfig, OmegaConf

    from gpt1 import api
    from gpt1.core.compat import config_node

    found: list[Leaf] = []
    structured: list[str] = []

    def walk(cfg: DictConfig, prefix: str) -> None:
        schema = OmegaConf.get_type(cfg)
        fields = {f.name: f.metadata for f in dataclasses.fields(schema)} if dataclasses.is_dataclass(schema) else {}
        if fields:
            structured.append(prefix)
        for key in cfg:
            node = config_node(cfg, key)
            if isinstance(node, DictConfig):
                walk(node, f"{prefix}{key}.")
            elif fields:  # (the keys of a free dict, e.g. task.data_files, take anything)
                meta = node._metadata
                bounds = fields.get(key, {}).get("bounds")
                typed = meta.ref_type is not Any
                found.append(Leaf(f"{prefix}{key}", type(node).__name__, meta.optional, bounds or None, typed))

    walk(api.compose(command, COMPOSE_WITH[command]), "")
    return tuple(found), tuple(structured)


def _outside(leaf: Leaf, draw) -> str:
    """A value outside ``leaf``'s bounds."""
    op, bound = draw(st.sampled_from(sorted(leaf.bounds.items())))
    integer = leaf.kind == "IntegerNode"
    step = draw(st.sampled_from([1, 2, 1000]))
    value: Any
    if op in ("ge", "gt"):
        value = bound - step if op == "ge" else bound - (step - 1)
        if not integer and draw(st.booleans()):
            value = bound - draw(st.sampled_from([0.5, 1e-3])) if op == "ge" else bound
    else:
        value = bound + step if op == "le" else bound + (step - 1)
        if not integer and draw(st.booleans()):
            value = draw(st.sampled_from([bound + 0.5, math.inf]))
    if not integer and op in ("ge", "gt") and draw(st.booleans()):
        value = "-inf"
    value = str(int(value)) if integer else str(value)
    if leaf.kind == "ListConfig":
        return f"[0.5,{value}]"
    return value


def _new_name(draw, taken: set[str]) -> str:
    name = draw(
        st.one_of(
            st.sampled_from(sorted(taken)).map(lambda n: n[:-1] + "x" if len(n) > 1 else n + "x"),
            st.sampled_from(sorted(taken)).map(lambda n: n + "_s"),
            st.text(string.ascii_lowercase + "_", min_size=1, max_size=10).filter(lambda n: n.isidentifier()),
        )
    )
    return name if name not in taken else name + "zq"


def _unknown_key(draw, command: str, plus: bool) -> tuple[str, list[str]]:
    all_leaves, structured = leaves(command)
    keys = {leaf.key for leaf in all_leaves}
    prefix = draw(st.sampled_from(structured))
    taken = {k[len(prefix) :].split(".")[0] for k in keys if k.startswith(prefix)}
    key = prefix + _new_name(draw, taken)
    sign = draw(st.sampled_from(["+", "++"])) if plus else ""
    return f"{sign}{key}=1", [key]


def _wrong_type(draw, command: str) -> tuple[str, list[str]]:
    leaf = draw(st.sampled_from([leaf for leaf in leaves(command)[0] if leaf.kind in WRONG_TYPE and leaf.typed]))
    return f"{leaf.key}={draw(st.sampled_from(WRONG_TYPE[leaf.kind]))}", [leaf.key]


def _out_of_range(draw, command: str) -> tuple[str, list[str]]:
    leaf = draw(st.sampled_from([leaf for leaf in leaves(command)[0] if leaf.bounds]))
    return f"{leaf.key}={_outside(leaf, draw)}", [leaf.key]


def _malformed(draw, command: str) -> tuple[str, list[str]]:
    leaf = draw(st.sampled_from(leaves(command)[0]))
    return f"{leaf.key}={draw(st.sampled_from(MALFORMED))}", [leaf.key]


def _no_key(draw, command: str) -> tuple[str, list[str]]:
    override = "=" + draw(st.sampled_from(["5", "abc", "[1]"]))
    return override, [override]


def _no_value(draw, command: str) -> tuple[str, list[str]]:
    leaf = draw(st.sampled_from(leaves(command)[0]))
    return draw(st.sampled_from([leaf.key, f"{leaf.key}==1"])), [leaf.key]


def _delete(draw, command: str) -> tuple[str, list[str]]:
    keys = {leaf.key for leaf in leaves(command)[0]}
    key = draw(st.sampled_from([*sorted(keys), _new_name(draw, keys)]))
    return f"~{key}", [key]


def _group_option(draw, command: str) -> tuple[str, list[str]]:
    override = f"{draw(st.sampled_from(GROUPS[command]))}=zz{draw(words)}"
    return override, [override]


def _foreign_group(draw, command: str) -> tuple[str, list[str]]:
    override = draw(st.sampled_from(FOREIGN_GROUPS[command]))
    return override, [override]


def _sweep_without_m(draw, command: str) -> tuple[str, list[str]]:
    leaf = draw(st.sampled_from([leaf for leaf in leaves(command)[0] if leaf.kind == "IntegerNode"]))
    return f"{leaf.key}=1,2", [f"{leaf.key}=1,2"]


def _vocabulary(draw, command: str) -> tuple[str, list[str]]:
    key = draw(st.sampled_from(sorted(VOCABULARY & {leaf.key for leaf in leaves(command)[0]})))
    return f"{key}=zz{draw(words)}", [key]


INVALID = {
    "unknown_key": lambda draw, command: _unknown_key(draw, command, plus=False),
    "added_unknown_key": lambda draw, command: _unknown_key(draw, command, plus=True),
    "wrong_type": _wrong_type,
    "out_of_range": _out_of_range,
    "malformed": _malformed,
    "no_key": _no_key,
    "no_value": _no_value,
    "delete": _delete,
    "group_option": _group_option,
    "foreign_group": _foreign_group,
    "sweep_without_m": _sweep_without_m,
    "vocabulary": _vocabulary,
}
"""Each kind of invalid override: (draw, command) -> (the override, what its error line must name)."""


@st.composite
def recipes(draw, commands: tuple[str, ...] = tuple(BASES)) -> Recipe:
    """One override added to a command's valid line (``BASES``): an invalid one of a kind of ``INVALID``, or valid
    ones of ``SAFE``."""
    command = draw(st.sampled_from(commands))
    base = BASES[command]
    mode = draw(st.sampled_from([m for m in [*INVALID, "valid"] if _mode_applies(m, command)]))
    if mode == "valid":
        chosen = draw(st.lists(st.sampled_from(sorted(SAFE[command])), min_size=1, max_size=2, unique=True))
        overrides = [f"{key}={draw(SAFE[command][key])}" for key in chosen]
        return Recipe("overrides", f"{command}: valid {' '.join(overrides)}", [*base, *overrides], Expect.valid)
    override, names = INVALID[mode](draw, command)
    return Recipe("overrides", f"{command}: {mode} {override}", [*base, override], Expect.invalid, names)


def _mode_applies(mode: str, command: str) -> bool:
    all_leaves = leaves(command)[0]
    if mode == "wrong_type":
        return any(leaf.kind in WRONG_TYPE and leaf.typed for leaf in all_leaves)
    if mode == "out_of_range":
        return any(leaf.bounds for leaf in all_leaves)
    if mode == "group_option":
        return bool(GROUPS[command])
    if mode == "foreign_group":
        return command in FOREIGN_GROUPS
    if mode == "vocabulary":  # (gpt1 prepare trains nothing: it reads no trainer.*, device or model.* word)
        return command != "prepare" and bool(VOCABULARY & {leaf.key for leaf in all_leaves})
    if mode == "valid":
        return bool(SAFE[command])
    if mode == "sweep_without_m":
        return any(leaf.kind == "IntegerNode" for leaf in all_leaves)
    return True
