"""Checkpoints: gpt1's own format, Hugging Face's openai-gpt import and export, and weight transfer between models."""
