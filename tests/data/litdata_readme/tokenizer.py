# ruff: noqa
# A stand-in for lit-gpt's Tokenizer in the README's pre-training script: one token per UTF-8 byte,
# 256 for end-of-sequence, 257 for beginning-of-sequence.
from __future__ import annotations

import torch


class Tokenizer:
    def __init__(self, checkpoint_dir):
        self.checkpoint_dir = checkpoint_dir

    def encode(self, text, bos=False, eos=True):
        ids = ([257] if bos else []) + list(text.encode("utf-8")) + ([256] if eos else [])
        return torch.tensor(ids, dtype=torch.int32)
