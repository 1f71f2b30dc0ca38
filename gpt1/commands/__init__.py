"""The gpt1 commands, one Hydra app each (``gpt1 <command>``, ``python -m gpt1.commands.<command>``): thin drivers
that compose the library and return their metrics. Each command's function (``pretrain.train``, ``finetune.finetune``,
``evaluate.evaluate``, ...: what ``gpt1.api`` gives) returns what it writes to metrics.json; its Hydra task function
``main`` (what a multirun's job returns) returns the number of it that ``optimized_metric`` names, the one value a
sweeper (``hparams_search=optuna``) optimises (``gpt1.app.objective.job_value``)."""
