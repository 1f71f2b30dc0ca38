"""gpt1: a faithful GPT-1 reproduction and experiment framework on PyTorch Lightning and Hydra.

The package's layers, from the top down (each may import only those below it; pyproject.toml's import-linter
contracts check it): ``api`` (the library) > ``commands``, ``tools`` > ``app`` > ``training`` > ``tasks`` >
``data`` > ``checkpoints`` > ``cpu`` > ``model``, ``text``, ``cluster`` > ``core``.

Importing it, or any module of it, changes nothing in the process; ``gpt1.cpu.settings.configure()`` applies the CPU
speed settings (every gpt1 command calls it)."""

__version__ = "0.1.0"
