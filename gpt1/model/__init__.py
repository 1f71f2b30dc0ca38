"""The networks, in plain torch: the GPT-1 decoder (decoder.py), the LSTM baseline (lstm.py), the model types and
their contract (registry.py), the task heads (heads.py), generation (generation.py) and the KV cache (kv_cache.py).
Nothing here knows the CPU path: ``gpt1.cpu`` swaps a model's layers from above."""
