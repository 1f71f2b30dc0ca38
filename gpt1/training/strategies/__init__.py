"""The training strategies, one module each, chosen by ``trainer.strategy`` (conf/trainer/*.yaml): one device
(``single``), DDP (``ddp``), FSDP2 (``fsdp2``), Lightning's FSDP1 (``fsdp1``) and DeepSpeed (``deepspeed``). Each
holds all that gpt1 knows of its strategy: the Lightning strategy it builds, what it refuses (devices, precisions),
how the model is prepared and its gradients clipped, its checkpoints and how its full weights are gathered
(``base.TrainingStrategy``, the interface). ``registry`` finds them: a new strategy is its module and its YAML."""
