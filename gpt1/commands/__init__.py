"""The gpt1 commands, one Hydra app each (``gpt1 <command>``, ``python -m gpt1.commands.<command>``): thin drivers
that compose the library and return their metrics. Each command's function (``pretrain.train``, ``finetune.finetune``,
``evaluate.evaluate``, ...: what ``gpt1.api`` gives) returns what it writes to metrics.json, and so does its Hydra
task function ``main`` (a multirun's job returns), but for ``gpt1 finetune``'s and ``gpt1 zeroshot``'s, which return
the task's main validation metric, the one value a sweeper (``hparams_search=optuna``) optimises."""
