"""A Llama decoder block (Touvron et al., "LLaMA: open and efficient foundation language models", 2023),
written as Meta's reference code writes it (github.com/meta-llama/llama, ``llama/model.py``): RMSNorm
computed in float32, rotary position embeddings as a complex multiplication, attention with a float32
softmax, and a SwiGLU MLP, with no biases. The DOPPLER paper's ``transformer_block_215nodes`` is this
block at Llama-7B widths, partitioned by the paper's system; :mod:`workbench.importers.paper_check` compares them.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn


class RMSNorm(nn.Module):
    """``x / sqrt(mean(x²) + eps) · gain`` over the last dimension, in float32, cast back to the input's dtype."""

    def __init__(self, width: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(width))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        wide = x.float()
        normed = wide * torch.rsqrt(wide.pow(2).mean(-1, keepdim=True) + self.eps)
        return normed.type_as(x) * self.weight


def rotary_frequencies(head_dim: int, seq: int, theta: float = 10000.0) -> torch.Tensor:
    """``(seq, head_dim / 2)`` complex rotations ``exp(i · position · theta^(-2j / head_dim))``."""
    inverse = 1.0 / theta ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim)
    angles = torch.outer(torch.arange(seq, dtype=torch.float32), inverse)
    return torch.polar(torch.ones_like(angles), angles)


def rotate(x: torch.Tensor, frequencies: torch.Tensor) -> torch.Tensor:
    """Rotary embedding of ``x`` ``(batch, seq, heads, head_dim)``: pairs of features as complex numbers, rotated
    by ``frequencies`` ``(1, seq, 1, head_dim / 2)``."""
    batch, seq, heads, head_dim = x.shape
    pairs = torch.view_as_complex(x.float().reshape(batch, seq, heads, head_dim // 2, 2))
    rotated = torch.view_as_real(pairs * frequencies).flatten(3)
    return rotated.type_as(x)


class LlamaBlock(nn.Module):
    """``(batch, seq, width)`` → ``(batch, seq, width)``: pre-norm attention with rotary embeddings, then a SwiGLU MLP.

    ``causal=False`` leaves out the causal mask, as the paper's graph does (its attention goes from the
    scores' scaling straight to the softmax).
    """

    def __init__(
        self, width: int = 4096, heads: int = 32, ffn: int = 11008, batch: int = 4, seq: int = 4096, causal: bool = True, eps: float = 1e-6
    ) -> None:
        super().__init__()
        self.heads, self.head_dim, self.causal = heads, width // heads, causal
        self.batch, self.seq, self.width = batch, seq, width
        self.attention_norm = RMSNorm(width, eps)
        self.wq = nn.Linear(width, width, bias=False)
        self.wk = nn.Linear(width, width, bias=False)
        self.wv = nn.Linear(width, width, bias=False)
        self.wo = nn.Linear(width, width, bias=False)
        self.ffn_norm = RMSNorm(width, eps)
        self.w1 = nn.Linear(width, ffn, bias=False)  # gate
        self.w3 = nn.Linear(width, ffn, bias=False)  # up
        self.w2 = nn.Linear(ffn, width, bias=False)  # down
        self.register_buffer("frequencies", rotary_frequencies(self.head_dim, seq)[None, :, None], persistent=False)
        if causal:
            self.register_buffer("mask", torch.full((seq, seq), float("-inf")).triu(1), persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, seq, width = x.shape
        h = self.attention_norm(x)
        q, k, v = (w(h).view(batch, seq, self.heads, self.head_dim) for w in (self.wq, self.wk, self.wv))
        q, k = rotate(q, self.frequencies), rotate(k, self.frequencies)  # the block's own sequence length
        q, k, v = (t.transpose(1, 2) for t in (q, k, v))
        scores = torch.matmul(q, k.transpose(2, 3)) * (1.0 / math.sqrt(self.head_dim))
        if self.causal:
            scores = scores + self.mask
        probs = F.softmax(scores.float(), dim=-1).type_as(q)
        context = torch.matmul(probs, v).transpose(1, 2).reshape(batch, seq, width)
        x = x + self.wo(context)
        h = self.ffn_norm(x)
        return x + self.w2(F.silu(self.w1(h)) * self.w3(h))

    def example_inputs(self) -> tuple[torch.Tensor]:
        return (torch.zeros(self.batch, self.seq, self.width, dtype=self.wq.weight.dtype, device=self.wq.weight.device),)


def llama_block(width: int = 4096, heads: int = 32, ffn: int = 11008, batch: int = 4, seq: int = 4096, causal: bool = True) -> LlamaBlock:
    """A float16 Llama block, Llama-7B widths by default; ``example_inputs()`` gives ``batch`` sequences of ``seq`` activations.

    Build it under ``torch.device("meta")`` for shapes only: at the default sizes its weights take 400 MB.
    """
    return LlamaBlock(width, heads, ffn, batch, seq, causal).half()
