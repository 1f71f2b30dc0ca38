"""Text to token ids: the tokenizers (a BPE trained by `tokenizers`, or OpenAI's original vocab and pipeline)."""
