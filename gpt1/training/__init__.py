"""The Lightning side of gpt1: the LightningModules, callbacks, the Trainer and its loggers, resume, a run's results."""
