"""The training strategies, one module each, chosen by ``trainer.strategy`` (conf/trainer/*.yaml): each holds all
that gpt1 knows of its strategy (``base.TrainingStrategy``); ``registry`` finds them."""
