"""Each private API that gpt1.core.compat wraps still exists in the installed library: an upgrade that removes one
fails here, by name, rather than silently somewhere in a run."""

# -- torch ------------------------------------------------------------------------------------------------------------


def test_torch_ops_mkldnn_linear_pointwise_exists_and_computes_f_linear():
    """gpt1.cpu.kernels runs fp32 products on torch.ops.mkldnn._linear_pointwise (private) on x86 CPUs: if torch drops
    or changes it, this fails (gpt1 would fall back to torch's matmuls, correct but slower where oneDNN wins)."""
    import platform

    import pytest
    import torch
    import torch.nn.functional as F

    from gpt1.core import compat
    from gpt1.cpu import kernels

    if platform.machine().lower() not in ("x86_64", "amd64") or not torch.backends.mkldnn.is_available():
        pytest.skip("oneDNN's linear is used on x86 CPUs only")
    op = compat.onednn_linear()
    assert op is not None, "torch.ops.mkldnn._linear_pointwise is gone (gpt1.core.compat.onednn_linear)"
    assert kernels.onednn_available()
    x, w, b = torch.randn(3, 8), torch.randn(5, 8), torch.randn(5)
    torch.testing.assert_close(op(x, w, b, "none", [], ""), F.linear(x, w, b))
    torch.testing.assert_close(kernels.linear_forward(x, w, b, "onednn"), F.linear(x, w, b))


def test_tensor_post_accumulate_grad_hooks_exist():
    """gpt1.model.layers reads Tensor._post_accumulate_grad_hooks (private) to hook the sparse table gradient once:
    if torch drops it, this fails (gpt1 would fall back to F.embedding's dense gradient, correct but slower)."""
    import torch

    from gpt1.core import compat
    from gpt1.model import layers

    weight = torch.nn.Parameter(torch.randn(4, 3))
    hooks = compat.post_accumulate_grad_hooks(weight)
    assert hooks is not False, (
        "Tensor._post_accumulate_grad_hooks is gone (gpt1.core.compat.post_accumulate_grad_hooks)"
    )
    assert hooks is None  # no hook yet
    assert layers._densified(weight) and len(compat.post_accumulate_grad_hooks(weight)) == 1


# -- Hydra ------------------------------------------------------------------------------------------------------------

# -- OmegaConf --------------------------------------------------------------------------------------------------------

# -- Lightning --------------------------------------------------------------------------------------------------------

# -- submitit ---------------------------------------------------------------------------------------------------------
