"""A tiny GPT-style language model: token + position embeddings, pre-norm causal self-attention
blocks, and an output head tied to the token embedding. Small enough to train on two CPU cores."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional as F

__all__ = ["GPTConfig", "TinyGPT"]


@dataclass(frozen=True)
class GPTConfig:
    """Model size.

    Attributes:
        vocab_size: Token ids are in ``[0, vocab_size)``.
        seq_len: Longest input sequence (positions).
        dim: Embedding width; a multiple of ``heads``.
        layers: Transformer blocks.
        heads: Attention heads per block.
    """

    vocab_size: int
    seq_len: int
    dim: int = 128
    layers: int = 2
    heads: int = 4


class _Block(nn.Module):
    def __init__(self, config: GPTConfig) -> None:
        super().__init__()
        self.heads = config.heads
        self.ln1 = nn.LayerNorm(config.dim)
        self.qkv = nn.Linear(config.dim, 3 * config.dim)
        self.proj = nn.Linear(config.dim, config.dim)
        self.ln2 = nn.LayerNorm(config.dim)
        self.mlp = nn.Sequential(
            nn.Linear(config.dim, 4 * config.dim), nn.GELU(), nn.Linear(4 * config.dim, config.dim)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, length, width = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(width, dim=2)
        shape = (batch, length, self.heads, width // self.heads)
        q, k, v = (t.view(shape).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(y.transpose(1, 2).reshape(batch, length, width))
        out: torch.Tensor = x + self.mlp(self.ln2(x))
        return out


class TinyGPT(nn.Module):
    """Next-token predictor: ``forward(ids)`` with ids ``(batch, length)`` gives logits
    ``(batch, length, vocab_size)``; ``length <= config.seq_len``."""

    def __init__(self, config: GPTConfig) -> None:
        super().__init__()
        if config.dim % config.heads:
            raise ValueError(f"dim={config.dim} must be a multiple of heads={config.heads}")
        self.config = config
        self.tokens = nn.Embedding(config.vocab_size, config.dim)
        self.positions = nn.Embedding(config.seq_len, config.dim)
        self.blocks = nn.ModuleList(_Block(config) for _ in range(config.layers))
        self.ln_f = nn.LayerNorm(config.dim)
        self.head = nn.Linear(config.dim, config.vocab_size, bias=False)
        self.head.weight = self.tokens.weight  # weight tying
        self.apply(self._init)

    @staticmethod
    def _init(module: nn.Module) -> None:
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)
        if isinstance(module, nn.Linear) and module.bias is not None:
            nn.init.zeros_(module.bias)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        positions = torch.arange(ids.shape[1], device=ids.device)
        x = self.tokens(ids) + self.positions(positions)
        for block in self.blocks:
            x = block(x)
        logits: torch.Tensor = self.head(self.ln_f(x))
        return logits

    def loss(self, window: torch.Tensor) -> torch.Tensor:
        """Mean next-token cross-entropy (nats) over a batch of windows ``(batch, seq_len + 1)``."""
        inputs, targets = window[:, :-1], window[:, 1:]
        logits = self(inputs)
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))
