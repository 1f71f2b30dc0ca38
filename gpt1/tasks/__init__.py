"""Tasks, without their data: what a task is (``spec``: ``TaskConfig``, ``conf/task/NAME.yaml``), the task types, one
class each behind one interface (``task_type``: ``TaskType``; ``classification``, ``similarity``, ``multiple_choice``,
``winograd``) found by name through one registry (``registry``: ``get_task_type``, ``register``), a split's examples
as text (``examples``), a batch through the decoder and its head, packed (``packing``), the metrics (``metrics``) and
the zero-shot heuristics (``heuristics``), each one entry."""
