"""The gpt1 commands, one Hydra app each (``gpt1 <command>``, ``python -m gpt1.commands.<command>``): thin drivers
that compose the library and return their metrics."""
