"""What Hydra and OmegaConf let into a composed config and gpt1's schemas and config groups do not declare, refused
in one line before any work: a key that no schema field declares (Hydra adds one given with ``+`` or ``++``,
bypassing the schema: it was silently ignored), a list or mapping as an item of a list of values
(``optim.betas=[[0.9,0.99]]``, which OmegaConf keeps in a ``list[float]``), and an optional group's option that does
not exist (``debug=fsat``, which Hydra skips)."""

from __future__ import annotations

import dataclasses

from omegaconf import DictConfig, ListConfig, OmegaConf

from gpt1.app.suggest import group_options, key_hint, no_such_option, undeletable
from gpt1.core.compat import config_node, list_item_type
from gpt1.core.errors import ConfigError

SCALARS = (str, int, float, bool)


def check_declared(cfg: DictConfig, prefix: str = "") -> None:
    """Refuse a key of ``cfg`` (and of every config below it) that its schema does not declare, a container inside a
    list of values, and a declared key deleted (``~seed``): a ``ConfigError`` naming the key. A free mapping (a field
    typed ``dict``, e.g. ``task.data_files``, ``task.splits``) takes any key; Hydra's own node (``hydra``) is
    Hydra's."""
    schema = OmegaConf.get_type(cfg)
    fields = [f.name for f in dataclasses.fields(schema)] if dataclasses.is_dataclass(schema) else None
    deleted = [name for name in fields or [] if name not in cfg.keys()]  # (a value ??? is not "in" cfg)
    if deleted:  # ~key of a field (Hydra deletes it)
        raise ConfigError(undeletable(prefix + deleted[0]))
    for key in cfg:
        if prefix == "" and key == "hydra":
            continue
        if fields is not None and key not in fields:  # added by a + or ++ override, which Hydra lets past the schema
            hint = key_hint(str(key), fields, prefix) or ": remove it"
            raise ConfigError(
                f"{prefix}{key}: not a key of {schema.__name__}, so a + or ++ cannot add it (the config is typed)"
                f"{hint} (`--cfg job` prints every key)"
            )
        node = config_node(cfg, key)
        if isinstance(node, DictConfig):
            check_declared(node, f"{prefix}{key}.")
        elif isinstance(node, ListConfig) and list_item_type(node) in SCALARS and not OmegaConf.is_missing(cfg, key):
            if any(isinstance(config_node(node, i), (DictConfig, ListConfig)) for i in range(len(node))):
                kind = list_item_type(node).__name__
                raise ConfigError(
                    f"{prefix}{key}={OmegaConf.to_container(node)}: a list of {kind} values, each item one value: "
                    f"give {prefix}{key}=[a,b] (no list inside it)"
                )


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
