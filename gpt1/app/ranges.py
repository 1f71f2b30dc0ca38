"""Range checks: a config value outside its schema field's ``ranged`` bounds (``gpt1.core.errors.ranged``) refused in
one line that names the key, before any work (a key no schema declares: ``gpt1.app.declared``)."""

from __future__ import annotations

import dataclasses

from omegaconf import DictConfig, ListConfig, OmegaConf

from gpt1.app.declared import check_declared
from gpt1.core.compat import config_node
from gpt1.core.errors import ConfigError, out_of_bounds


def check_ranges(cfg: DictConfig, prefix: str = "") -> None:
    """Refuse a value outside its schema field's ``ranged`` bounds, in ``cfg`` and every config below it: a
    ``ConfigError`` naming the key. Every command's entry function (``gpt1.commands.pretrain.train``, ...) calls it
    first, so that a bad value fails at start-up rather than when it is first used (after a tokenizer is trained, a
    corpus packed, a model built), from the command line and from Python alike; a key no schema declares is refused
    first (``check_declared``)."""
    if not prefix:
        check_declared(cfg)
    schema = OmegaConf.get_type(cfg)
    fields = {f.name: f.metadata for f in dataclasses.fields(schema)} if dataclasses.is_dataclass(schema) else {}
    for key in cfg:
        node = config_node(cfg, key)
        if isinstance(node, DictConfig):
            check_ranges(node, f"{prefix}{key}.")
        elif "bounds" in fields.get(key, {}) and not OmegaConf.is_missing(cfg, key) and cfg[key] is not None:
            value = cfg[key]
            rule = out_of_bounds(fields[key], list(value) if isinstance(value, ListConfig) else value)
            if rule is not None:
                raise ConfigError(f"{prefix}{key}={value}: out of range; {rule}")
