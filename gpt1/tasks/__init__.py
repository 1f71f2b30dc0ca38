"""Tasks and their data: what a task is (``spec``: ``TaskConfig``, ``conf/task/NAME.yaml``), the task types, one class
each behind one interface (``task_type``: ``TaskType``; ``classification``, ``similarity``, ``multiple_choice``,
``winograd``) found by name through one registry (``registry``: ``get_task_type``, ``register``); a split resolved
once (``split``: ``TaskSplit``), its rows read into examples as text (``rows``, ``examples``), encoded and cached
(``encoding``), batched (``batches``) and served by the data module (``task_data``: ``TaskDataModule``); the metrics
(``metrics``) and the zero-shot heuristics (``heuristics``), each one entry."""
