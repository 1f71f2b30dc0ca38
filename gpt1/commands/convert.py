"""``gpt1 convert``: Hugging Face ``openai-gpt`` checkpoints to and from gpt1 checkpoints.

    gpt1 convert from-hf openai-community/openai-gpt openai-gpt.ckpt   # OpenAI's weights, from the hub or its cache
    gpt1 convert from-hf path/to/openai-gpt openai-gpt.ckpt     # then: gpt1 generate ckpt=openai-gpt.ckpt prompt=...
    gpt1 convert to-hf outputs/.../last.ckpt hf_dir               # OpenAIGPTLMHeadModel.from_pretrained("hf_dir")

The positional form is shorthand for ``direction=... src=... dst=...``; every other Hydra flag works as usual.
"""

from __future__ import annotations

import sys
from typing import Any

from omegaconf import DictConfig

from gpt1.app.objective import job_value
from gpt1.app.runner import command
from gpt1.checkpoints.hf import export_hf, import_hf
from gpt1.core.errors import ConfigError


def convert(cfg: DictConfig) -> None:
    """Run the conversion ``cfg.direction`` from ``cfg.src`` to ``cfg.dst``."""
    if cfg.direction == "from-hf":
        import_hf(cfg.src, cfg.dst, tokenizer=cfg.tokenizer)
    elif cfg.direction == "to-hf":
        export_hf(cfg.src, cfg.dst)
    else:
        raise ConfigError(f"direction={cfg.direction!r}: use from-hf or to-hf")
    print(f"wrote {cfg.dst}")


def positional_to_overrides(argv: list[str]) -> list[str]:
    """Turn leading ``DIRECTION SRC DST`` arguments into ``direction=``, ``src=``, ``dst=`` overrides."""
    keys, out, args = ["direction", "src", "dst"], [], list(argv)
    while args and keys and "=" not in args[0] and not args[0].startswith("-"):
        value = args.pop(0).replace("\\", "\\\\").replace("'", "\\'")
        out.append(f"{keys.pop(0)}='{value}'")
    return out + args


@command("convert")
def _hydra_main(cfg: DictConfig) -> Any:
    return job_value(cfg, convert(cfg))


def main() -> None:
    sys.argv[1:] = positional_to_overrides(sys.argv[1:])
    _hydra_main()


if __name__ == "__main__":
    main()
