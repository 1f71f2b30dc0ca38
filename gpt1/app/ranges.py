"""Range checks: a config value outside its schema field's ``ranged`` bounds (``gpt1.core.errors.ranged``), or a key
that is none of its schema's fields (which only a + or ++ override adds), refused in one line that names the key,
before any work."""

from __future__ import annotations

import dataclasses
import operator

from omegaconf import DictConfig, ListConfig, OmegaConf

from gpt1.app.suggest import key_hint
from gpt1.core.compat import config_node
from gpt1.core.errors import ConfigError

_BOUNDS = {"ge": (operator.ge, ">="), "gt": (operator.gt, ">"), "lt": (operator.lt, "<"), "le": (operator.le, "<=")}


def check_ranges(cfg: DictConfig) -> None:
    """Refuse a value outside its schema field's ``ranged`` bounds, in ``cfg`` and every config below it: a
    ``ConfigError`` naming the key. Every command's entry function (``gpt1.commands.pretrain.train``, ...) calls it
    first, so that a bad value fails at start-up rather than when it is first used (after a tokenizer is trained, a
    corpus packed, a model built), from the command line and from Python alike."""
    pending = [("", cfg)]
    for prefix, node in pending:  # (the list grows as the loop goes: each config below, breadth first)
        schema = OmegaConf.get_type(node)
        fields = {f.name: f.metadata for f in dataclasses.fields(schema)} if dataclasses.is_dataclass(schema) else {}
        for key in node:
            if fields and key not in fields:  # added by a + or ++ override, which Hydra lets past the schema
                raise ConfigError(
                    f"{prefix}{key}: not a key of {schema.__name__}, so a + or ++ cannot add it (the config is typed)"
                    f"{key_hint(str(key), fields, prefix)} (`--cfg job` prints every key)"
                )
            child = config_node(node, key)
            if isinstance(child, DictConfig):
                pending.append((f"{prefix}{key}.", child))
            elif "bounds" in fields.get(key, {}) and not OmegaConf.is_missing(node, key) and node[key] is not None:
                value, bounds = node[key], fields[key]["bounds"]
                for v in value if isinstance(value, ListConfig) else [value]:
                    if not all(_BOUNDS[op][0](v, bound) for op, bound in bounds.items()):
                        rule = " and ".join(f"{_BOUNDS[op][1]} {bound}" for op, bound in bounds.items())
                        hint = f" ({fields[key]['hint']})" if fields[key]["hint"] else ""
                        raise ConfigError(f"{prefix}{key}={value}: out of range; choose a value {rule}{hint}")
