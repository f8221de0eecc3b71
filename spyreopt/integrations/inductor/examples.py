"""Small torch models the adapter is tested and benchmarked on (the spyreopt workloads, in torch).

``get(name, size)`` returns ``(model, example inputs, trainable)``; ``size`` is "small" (the
test sizes) or "published" (the shapes of ``spyreopt.workloads``: MLP 128->256->1024, SDPA
1x4x256x64, ...).
"""

from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

SIZES = ("small", "published")


class MLP(nn.Module):
    def __init__(self, d: int, ff: int, out: int):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(d, ff), nn.GELU(), nn.Linear(ff, out))

    def forward(self, x):
        return self.net(x)


class SwiGLU(nn.Module):
    def __init__(self, d: int, ff: int):
        super().__init__()
        self.gate, self.up = nn.Linear(d, ff, bias=False), nn.Linear(d, ff, bias=False)
        self.down = nn.Linear(ff, d, bias=False)

    def forward(self, x):
        return self.down(F.silu(self.gate(x)) * self.up(x))


class Softmax(nn.Module):
    def forward(self, x):
        return torch.softmax(x, -1)


class Attention(nn.Module):
    def __init__(self, causal: bool = False):
        super().__init__()
        self.causal = causal

    def forward(self, q, k, v):
        return F.scaled_dot_product_attention(q, k, v, is_causal=self.causal)


class Block(nn.Module):
    """A pre-norm transformer block: causal attention with separate q/k/v projections and a GELU MLP."""

    def __init__(self, d: int = 64, heads: int = 4, ff: int = 128):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.q, self.k, self.v, self.o = (nn.Linear(d, d) for _ in range(4))
        self.mlp = nn.Sequential(nn.Linear(d, ff), nn.GELU(), nn.Linear(ff, d))

    def forward(self, x):
        b, s, d = x.shape
        h = self.ln1(x)
        q, k, v = (p(h).view(b, s, self.heads, d // self.heads).transpose(1, 2) for p in (self.q, self.k, self.v))
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.o(a.transpose(1, 2).reshape(b, s, d))
        return x + self.mlp(self.ln2(x))


def get(name: str, size: str = "small") -> tuple[nn.Module, tuple[torch.Tensor, ...], bool]:
    """(model, inputs, has parameters to train) of one example; raises KeyError for an unknown name."""
    small = size == "small"
    if size not in SIZES:
        raise KeyError(f"size {size!r}; known: {SIZES}")
    if name == "mlp":
        return (
            (MLP(64, 128, 32), (torch.randn(16, 64),), True)
            if small
            else (MLP(256, 1024, 256), (torch.randn(128, 256),), True)
        )
    if name == "swiglu":
        return (
            (SwiGLU(64, 128), (torch.randn(2, 16, 64),), True)
            if small
            else (SwiGLU(256, 1024), (torch.randn(1, 128, 256),), True)
        )
    if name == "softmax":
        shape = (64, 128) if small else (512, 1024)
        return Softmax(), (torch.randn(*shape, dtype=torch.float16),), False
    if name == "layernorm":
        return (
            (nn.LayerNorm(128), (torch.randn(64, 128),), True)
            if small
            else (nn.LayerNorm(1024), (torch.randn(512, 1024),), True)
        )
    if name in ("sdpa", "sdpa_causal"):
        shape = (1, 4, 64, 32) if small else (1, 4, 256, 64)
        return Attention(name == "sdpa_causal"), tuple(torch.randn(*shape) for _ in range(3)), False
    if name == "block":
        return (
            (Block(), (torch.randn(2, 16, 64),), True)
            if small
            else (Block(256, 4, 1024), (torch.randn(1, 128, 256),), True)
        )
    raise KeyError(f"unknown example {name!r}; known: {names()}")


def names() -> list[str]:
    return ["mlp", "swiglu", "softmax", "layernorm", "sdpa", "sdpa_causal", "block"]
