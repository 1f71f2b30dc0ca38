"""The Lightning side of gpt1: the training schemas, the LightningModules, the callbacks, the Trainer and its
loggers, one run of a training command (``TrainingRun``), resume, a run's results and the inputs it read."""
