"""Clusters: SLURM jobs through Hydra's submitit launcher (requeue on preemption, the job's environment)."""
