"""The Lightning side of gpt1: the training schemas, the LightningModules, the callbacks (one per module), the Trainer
and its loggers, one run of a training command (``TrainingRun``), resume, a run's results (kept, never silently
redone or lost), the inputs it read, and a task batch through the decoder and its head (``packing``)."""
