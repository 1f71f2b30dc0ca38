"""The private APIs of the libraries gpt1 builds on, each behind one function here and nowhere else, so that an upgrade
that removes or changes one breaks one place, loudly: ``tests/test_compat.py`` checks that each still exists.

Each function imports its library when it is called, not when this module is imported (the model and the CPU path
import this module and only torch)."""

# -- torch ------------------------------------------------------------------------------------------------------------


def onednn_linear():
    """torch's private oneDNN fp32 linear, ``torch.ops.mkldnn._linear_pointwise(x, weight, bias, "none", [], "")``
    (x @ weight.T + bias), or None where this torch has none (``gpt1.cpu.kernels`` then runs every product on
    torch's own matmuls)."""
    import torch

    try:
        return torch.ops.mkldnn._linear_pointwise
    except (AttributeError, RuntimeError):
        return None


def post_accumulate_grad_hooks(tensor):
    """The hooks ``Tensor.register_post_accumulate_grad_hook`` put on ``tensor`` (its private
    ``_post_accumulate_grad_hooks``: None before the first, then a dict of id -> hook), or False where this torch
    does not expose them (``gpt1.model.layers.embedding`` then keeps ``F.embedding``'s dense gradient)."""
    return getattr(tensor, "_post_accumulate_grad_hooks", False)


# -- Hydra ------------------------------------------------------------------------------------------------------------

# -- OmegaConf --------------------------------------------------------------------------------------------------------

# -- Lightning --------------------------------------------------------------------------------------------------------

# -- submitit ---------------------------------------------------------------------------------------------------------
