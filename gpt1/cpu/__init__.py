"""The CPU path, applied to a model from above: its settings (settings.py: threads, allocator, the measured choice of
matmul kernel per kind; probe.py, its measurement; allocator.py), the kernels (kernels.py), gpt1's CPU layers that
replace a model's own (layers.py) and one sequence decoded token by token (decoding.py)."""
