"""Fine-tuning tasks: what a task is (``TaskConfig``, ``conf/task/NAME.yaml``) and the task types, one class each
behind one interface (``TaskType``), found by name through one registry (``get_task_type``, ``register``)."""

from gpt1.tasks.base import TaskType, Transform, Truncation, kept_lengths
from gpt1.tasks.registry import get_task_type, register, task_types

__all__ = ["TaskType", "Transform", "Truncation", "get_task_type", "kept_lengths", "register", "task_types"]
