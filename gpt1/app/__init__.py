"""The command-line application: the CLI, the runner (every failure one line), the command configs and their
registration with Hydra, resumable sweeps, a run's recorded command replayed, the suggestions for a mistyped key."""
