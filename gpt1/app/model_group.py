"""The ``model`` config group: conf/model/NAME.yaml, a model's sizes, typed by the schema its defaults list names (a
model type's config, or fine-tuning's ``checkpoint_model_schema``). ``model_config`` reads one for code that runs
without Hydra (``gpt1 bench --model``, the library), so that the sizes are written once, in the YAML files."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from importlib.resources import files
from importlib.resources.abc import Traversable
from typing import Any, Optional

from omegaconf import DictConfig, ListConfig, OmegaConf

from gpt1.app.config import CheckpointModelConfig
from gpt1.core.errors import ConfigError
from gpt1.model.registry import MODEL_TYPES


def model_schemas() -> dict[str, type]:
    """The schemas the model group's files name, by their ConfigStore name: ``<type>_model_schema`` for each model
    type, ``checkpoint_model_schema`` for ``model=checkpoint``."""
    schemas: dict[str, type] = {f"{name}_model_schema": kind.config for name, kind in MODEL_TYPES.items()}
    return {**schemas, "checkpoint_model_schema": CheckpointModelConfig}


def model_options(of_type: Optional[str] = None) -> list[str]:
    """The options of the model group (the names of conf/model/*.yaml), sorted; ``of_type``: only those of that model
    type (``"gpt"``: gpt1, small, tiny)."""
    names = sorted(p.name.removesuffix(".yaml") for p in _folder().iterdir() if p.name.endswith(".yaml"))
    if of_type is None:
        return names
    return [n for n in names if _read(n)[0] is MODEL_TYPES[of_type].config]


def model_config(name: str) -> Any:
    """conf/model/``name``.yaml as its schema's object (a ``GPTConfig`` for ``"small"``), a new one at every call."""
    schema, values = _read(name)
    return OmegaConf.to_object(OmegaConf.merge(OmegaConf.structured(schema), values))


def _folder() -> Traversable:
    return files("gpt1.conf").joinpath("model")


def _read(name: str) -> tuple[type, DictConfig]:
    """conf/model/``name``.yaml: the schema its defaults list names, and its values."""
    path = _folder().joinpath(f"{name}.yaml")
    if not path.is_file():
        raise ConfigError(f"model={name}: no conf/model/{name}.yaml (the options: {', '.join(model_options())})")
    values = OmegaConf.create(path.read_text())
    defaults = values.pop("defaults", None)
    entries = [str(e) for e in defaults] if isinstance(defaults, ListConfig) else []
    named = [e.lstrip("/").split("@")[0] for e in entries if e != "_self_"]
    schemas = model_schemas()
    if len(named) != 1 or named[0] not in schemas:
        raise ConfigError(
            f"conf/model/{name}.yaml: its defaults list must name one schema, one of {sorted(schemas)} "
            f"(as `- /gpt_model_schema@_here_`), not {entries}"
        )
    return schemas[named[0]], values


class Presets(Mapping[str, Any]):
    """GPT-1's sizes by name (gpt1, small, tiny: the model group's files of the ``gpt`` type), each read from its file
    when looked up: ``PRESETS["small"]`` is ``model_config("small")``, a ``GPTConfig``."""

    def __getitem__(self, name: str) -> Any:
        if name not in model_options("gpt"):
            raise KeyError(name)
        return model_config(name)

    def __iter__(self) -> Iterator[str]:
        return iter(model_options("gpt"))

    def __len__(self) -> int:
        return len(model_options("gpt"))


PRESETS = Presets()
"""``gpt1.api.PRESETS``: GPT-1's sizes, as conf/model/ gives them."""
