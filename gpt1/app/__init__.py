"""The command-line application: the CLI, the runner that turns every failure into one line, the command configs and
their registration with Hydra, the model group's files, resumable sweeps, a run's recorded command replayed (and what
each key changes), and the suggestions for a mistyped key."""
