"""The tools beside the commands, with plain flags: ``gpt1 bench`` (speed: ``bench*``) and ``gpt1 report`` (sweep
reports: ``report*``)."""
