"""A composed config checked against its schemas and config groups before any work, for what Hydra and OmegaConf let
in: a refusal in one line that names the key."""

from __future__ import annotations

import dataclasses

from omegaconf import DictConfig, ListConfig, OmegaConf

from gpt1.app.suggest import group_options, key_hint, no_such_option, undeletable
from gpt1.core.compat import config_node, list_item_type
from gpt1.core.errors import ConfigError, out_of_bounds

SCALARS = (str, int, float, bool)


def check_config(cfg: DictConfig) -> None:
    """Refuse, in ``cfg`` and every config below it, a key its schema does not declare (added by ``+``/``++``: it
    was silently ignored), a declared key deleted (``~seed``), a container inside a list of values
    (``optim.betas=[[0.9,0.99]]``, which OmegaConf keeps) and a value outside its field's ``ranged`` bounds: a
    ``ConfigError`` naming the key. Every command's entry function calls it first, so that a bad value fails at
    start-up, from the command line and from Python alike. A field typed ``dict`` takes any key."""
    pending = [("", cfg)]
    for prefix, node in pending:  # (the list grows as the loop goes: each config below, breadth first)
        schema = OmegaConf.get_type(node)
        fields = {f.name: f.metadata for f in dataclasses.fields(schema)} if dataclasses.is_dataclass(schema) else None
        deleted = [name for name in fields or {} if name not in node.keys()]  # (a value ??? is not "in" node)
        if deleted:  # ~key of a field (Hydra deletes it)
            raise ConfigError(undeletable(prefix + deleted[0]))
        for key in node:
            if not prefix and key == "hydra":
                continue
            if fields is not None and key not in fields:  # added by + or ++, which Hydra lets past the schema
                hint = key_hint(str(key), fields, prefix) or ": remove it"
                raise ConfigError(
                    f"{prefix}{key}: not a key of {schema.__name__}, so a + or ++ cannot add it (the config is typed)"
                    f"{hint} (`--cfg job` prints every key)"
                )
            child = config_node(node, key)
            if isinstance(child, DictConfig):
                pending.append((f"{prefix}{key}.", child))
            elif isinstance(child, ListConfig) and not OmegaConf.is_missing(node, key):
                kind = list_item_type(child)  # a list of values (list[float], ...): one value per item
                if kind in SCALARS and any(
                    isinstance(config_node(child, i), (DictConfig, ListConfig)) for i in range(len(child))
                ):
                    raise ConfigError(
                        f"{prefix}{key}={OmegaConf.to_container(child)}: a list of {kind.__name__} values, each item "
                        f"one value: give {prefix}{key}=[a,b] (no list inside it)"
                    )
            if (
                "bounds" in (fields or {}).get(key, {})
                and not OmegaConf.is_missing(node, key)
                and node[key] is not None
            ):
                value = node[key]
                rule = out_of_bounds(fields[key], list(value) if isinstance(value, ListConfig) else value)
                if rule is not None:
                    raise ConfigError(f"{prefix}{key}={value}: out of range; {rule}")


def check_choices(config: DictConfig) -> None:
    """Refuse an option of an optional config group, chosen on the command line, that no config directory holds
    (``debug=fsat``: Hydra leaves an optional group out when it finds no option of that name, and the run went on
    without it): a ``ConfigError`` naming it and the group's options. A command's own default (``hparams_search:
    none``, an option that is meant to be absent) is no choice of the user's."""
    given = {str(o).split("=", 1)[0].lstrip("+~") for o in OmegaConf.select(config, "hydra.overrides.task", default=[])}
    for group, value in OmegaConf.select(config, "hydra.runtime.choices", default={}).items():
        if value is None or group not in given or value == "null":
            continue
        options = group_options(group)
        if options and value not in options:
            raise ConfigError(no_such_option(group, str(value), options))
