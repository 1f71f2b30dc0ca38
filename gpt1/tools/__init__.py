"""The tools beside the commands, with plain flags: ``gpt1 bench`` (speed) and ``gpt1 report`` (sweep reports)."""
