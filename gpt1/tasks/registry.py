"""The task types by name: the four of the paper, Winograd schemas (its zero-shot task), and any a user registers
(``register``) or names by import path."""

from __future__ import annotations

import importlib

from gpt1.core.errors import ConfigError
from gpt1.tasks.classification import Classification, Entailment
from gpt1.tasks.multiple_choice import MultipleChoice
from gpt1.tasks.similarity import Similarity
from gpt1.tasks.task_type import TaskType
from gpt1.tasks.winograd import Winograd

_TYPES: dict[str, TaskType] = {}


def register(task_type: TaskType) -> TaskType:
    """Make ``task_type`` the type of the tasks whose ``type`` is its name (replacing one of that name)."""
    _TYPES[task_type.name] = task_type
    return task_type


def task_types() -> dict[str, TaskType]:
    """Every registered type, by name."""
    return dict(_TYPES)


def get_task_type(name: str | TaskType) -> TaskType:
    """The type registered as ``name``; a dotted path (``mypackage.tasks.Template``) imports a ``TaskType`` subclass
    and registers it. A ``ConfigError`` naming ``task.type`` otherwise."""
    if isinstance(name, TaskType):
        return name
    if name in _TYPES:
        return _TYPES[name]
    module, _, attr = str(name).rpartition(".")
    if module:
        try:
            kind = getattr(importlib.import_module(module), attr)
        except (ImportError, AttributeError) as e:
            raise ConfigError(f"task.type={name}: cannot import it ({e})") from None
        if not (isinstance(kind, type) and issubclass(kind, TaskType)):
            raise ConfigError(f"task.type={name} is not a gpt1.tasks.task_type.TaskType subclass")
        task_type = kind()
        task_type.name = str(name)  # registered under its path: checkpoints then name it as the spec does
        return register(task_type)
    raise ConfigError(f"task.type={name!r}: one of {', '.join(_TYPES)} (or a TaskType's import path)")


for _builtin in (Classification(), Entailment(), Similarity(), MultipleChoice(), Winograd()):
    register(_builtin)
