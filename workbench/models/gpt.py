"""A GPT-style decoder (Radford et al., "Language models are unsupervised multitask learners", 2019):
token and position embeddings, pre-norm blocks of causal self-attention and a GELU MLP, a final
LayerNorm and a linear LM head."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


class Block(nn.Module):
    def __init__(self, width: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.attn_norm = nn.LayerNorm(width)
        self.qkv = nn.Linear(width, 3 * width)
        self.proj = nn.Linear(width, width)
        self.mlp_norm = nn.LayerNorm(width)
        self.fc = nn.Linear(width, 4 * width)
        self.act = nn.GELU()
        self.out = nn.Linear(4 * width, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, seq, width = x.size(0), x.size(1), x.size(2)
        q, k, v = self.qkv(self.attn_norm(x)).split(width, dim=2)
        q, k, v = (t.view(batch, seq, self.heads, width // self.heads).transpose(1, 2) for t in (q, k, v))
        attended = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(attended.transpose(1, 2).reshape(batch, seq, width))
        return x + self.out(self.act(self.fc(self.mlp_norm(x))))


class GPTDecoder(nn.Module):
    """Token ids ``(batch, seq)`` → next-token logits ``(batch, seq, vocab)``."""

    def __init__(
        self, vocab: int = 1024, width: int = 128, heads: int = 4, layers: int = 4, max_seq: int = 256, batch: int = 2, seq: int = 64
    ) -> None:
        super().__init__()
        self.vocab, self.batch, self.seq = vocab, batch, seq
        self.tokens = nn.Embedding(vocab, width)
        self.positions = nn.Embedding(max_seq, width)
        self.blocks = nn.ModuleList(Block(width, heads) for _ in range(layers))
        self.norm = nn.LayerNorm(width)
        self.head = nn.Linear(width, vocab, bias=False)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        x = self.tokens(ids) + self.positions.weight[: ids.size(1)]
        for block in self.blocks:
            x = block(x)
        return self.head(self.norm(x))

    def example_inputs(self) -> tuple[torch.Tensor]:
        return (torch.randint(0, self.vocab, (self.batch, self.seq)),)


def gpt_decoder(layers: int = 4, width: int = 128, heads: int = 4, vocab: int = 1024, batch: int = 2, seq: int = 64) -> GPTDecoder:
    """A small GPT decoder; ``example_inputs()`` gives ``batch`` sequences of ``seq`` token ids."""
    return GPTDecoder(vocab=vocab, width=width, heads=heads, layers=layers, max_seq=max(256, seq), batch=batch, seq=seq)
