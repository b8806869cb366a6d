"""Small module classes that generated networks use beyond `torch.nn`.

Their source is copied verbatim into every generated network and repro, so each class must
depend on nothing but `torch`, `nn` and `F` (torch.nn.functional).
"""

import torch
import torch.nn.functional as F
from torch import nn


class Residual(nn.Module):
    """``x + body(x)``, the body being the given modules in sequence."""

    def __init__(self, *body: nn.Module) -> None:
        super().__init__()
        self.body = nn.Sequential(*body)

    def forward(self, x):
        return x + self.body(x)


class InplaceResidual(nn.Module):
    """A residual written with in-place updates: ``y = linear(x); y += x; y.mul_(0.5)``."""

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.linear = nn.Linear(dim, dim)

    def forward(self, x):
        y = self.linear(x)
        y += x
        y.mul_(0.5)
        return y


class RMSNorm(nn.Module):
    """RMS normalisation as LLaMA-style code writes it by hand."""

    def __init__(self, dim: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        # Computed in at least float32, as LLaMA code does with x.float(); never down-cast a float64
        # input (inductor, which thunderfx falls back to, skips such casts and so differs from eager).
        wide = x.to(torch.promote_types(x.dtype, torch.float32))
        norm = wide * torch.rsqrt(wide.pow(2).mean(dim=-1, keepdim=True) + self.eps)
        return norm.to(x.dtype) * self.weight


class SwiGLU(nn.Module):
    """Gated MLP: ``proj(silu(fc_1(x)) * fc_2(x))``."""

    def __init__(self, dim: int, hidden: int) -> None:
        super().__init__()
        self.fc_1 = nn.Linear(dim, hidden, bias=False)
        self.fc_2 = nn.Linear(dim, hidden, bias=False)
        self.proj = nn.Linear(hidden, dim, bias=False)

    def forward(self, x):
        return self.proj(F.silu(self.fc_1(x)) * self.fc_2(x))


class Attention(nn.Module):
    """Multi-head self-attention through ``F.scaled_dot_product_attention``; a 2-d input is one sequence."""

    def __init__(self, dim: int, heads: int, causal: bool) -> None:
        super().__init__()
        self.heads, self.causal = heads, causal
        self.q, self.k, self.v = nn.Linear(dim, dim), nn.Linear(dim, dim), nn.Linear(dim, dim)
        self.out = nn.Linear(dim, dim)

    def forward(self, x):
        single = x.dim() == 2
        if single:
            x = x.unsqueeze(0)
        b, s, d = x.shape
        q, k, v = (proj(x).view(b, s, self.heads, d // self.heads).transpose(1, 2) for proj in (self.q, self.k, self.v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=self.causal)
        y = self.out(y.transpose(1, 2).reshape(b, s, d))
        return y.squeeze(0) if single else y


class Gram(nn.Module):
    """``(x @ x^T) @ x / width`` through ``torch.bmm``; a 2-d input is one batch entry."""

    def forward(self, x):
        single = x.dim() == 2
        x3 = x.unsqueeze(0) if single else x
        y = torch.bmm(torch.bmm(x3, x3.transpose(1, 2)), x3) / x3.shape[-1]
        return y.squeeze(0) if single else y


class MatMul(nn.Module):
    """``x @ weight`` with a plain parameter matrix."""

    def __init__(self, dim: int, out_features: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.randn(dim, out_features) / dim**0.5)

    def forward(self, x):
        return torch.matmul(x, self.weight)


class TransformerBlock(nn.Module):
    """A pre-norm transformer block: ``x + attention(norm_1(x))``, then ``x + mlp(norm_2(x))``."""

    def __init__(self, dim: int, heads: int, hidden: int, causal: bool) -> None:
        super().__init__()
        self.norm_1, self.norm_2 = RMSNorm(dim), RMSNorm(dim)
        self.attention = Attention(dim, heads, causal)
        self.mlp = SwiGLU(dim, hidden)

    def forward(self, x):
        x = x + self.attention(self.norm_1(x))
        return x + self.mlp(self.norm_2(x))


class CausalSelfAttention(nn.Module):
    """litgpt's causal self-attention: one fused qkv projection with grouped (GQA/MQA) key/value heads,
    rotary embeddings on the first ``rope_n_elem`` dims of each head, SDPA, output projection.

    Written as litgpt 0.5's ``CausalSelfAttention`` (same parameter names, qkv layout and order of
    operations), except that the rotary cache is computed from the input's length in ``forward``
    instead of being passed in from the model's buffers.
    """

    def __init__(self, dim: int, heads: int, query_groups: int, rope_base: int = 10000) -> None:
        super().__init__()
        self.heads, self.query_groups, self.head_size = heads, query_groups, dim // heads
        self.rope_n_elem = self.head_size // 2 * 2
        self.rope_base = rope_base
        self.qkv = nn.Linear(dim, (heads + 2 * query_groups) * self.head_size, bias=False)
        self.proj = nn.Linear(heads * self.head_size, dim, bias=False)

    def rope_cache(self, seq: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
        n_elem = self.rope_n_elem
        theta = 1.0 / (self.rope_base ** (torch.arange(0, n_elem, 2, device=device).float() / n_elem))
        idx_theta = torch.outer(torch.arange(seq, device=device).float(), theta).repeat(1, 2)
        return torch.cos(idx_theta), torch.sin(idx_theta)

    @staticmethod
    def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        half = x.size(-1) // 2
        rotated = torch.cat((-x[..., half:], x[..., :half]), dim=-1)
        return (x * cos + rotated * sin).to(dtype=x.dtype)

    def forward(self, x):
        single = x.dim() == 2
        if single:
            x = x.unsqueeze(0)
        b, t, _ = x.shape
        hs, kv_size = self.head_size, self.query_groups * self.head_size
        q, k, v = self.qkv(x).split((self.heads * hs, kv_size, kv_size), dim=-1)
        q = q.view(b, t, self.heads, hs).transpose(1, 2)
        k = k.view(b, t, self.query_groups, hs).transpose(1, 2)
        v = v.view(b, t, self.query_groups, hs).transpose(1, 2)
        if self.rope_n_elem:
            cos, sin = self.rope_cache(t, x.device)
            n = self.rope_n_elem
            q = torch.cat((self.apply_rope(q[..., :n], cos, sin), q[..., n:]), dim=-1)
            k = torch.cat((self.apply_rope(k[..., :n], cos, sin), k[..., n:]), dim=-1)
        if self.query_groups != self.heads:
            k = k.repeat_interleave(self.heads // self.query_groups, dim=1)
            v = v.repeat_interleave(self.heads // self.query_groups, dim=1)
        y = F.scaled_dot_product_attention(q, k, v, dropout_p=0.0, scale=1.0 / hs**0.5, is_causal=True)
        y = self.proj(y.transpose(1, 2).reshape(b, t, hs * self.heads))
        return y.squeeze(0) if single else y


class DecoderBlock(nn.Module):
    """litgpt's LLaMA-style ``Block``: ``x + attn(norm_1(x))``, then ``x + mlp(norm_2(x))`` (gated MLP)."""

    def __init__(self, dim: int, heads: int, query_groups: int, hidden: int) -> None:
        super().__init__()
        self.norm_1, self.norm_2 = RMSNorm(dim, eps=1e-5), RMSNorm(dim, eps=1e-5)
        self.attn = CausalSelfAttention(dim, heads, query_groups)
        self.mlp = SwiGLU(dim, hidden)

    def forward(self, x):
        x = self.attn(self.norm_1(x)) + x
        return self.mlp(self.norm_2(x)) + x
