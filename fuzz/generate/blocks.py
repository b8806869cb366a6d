"""Small module classes and functions that generated networks use beyond `torch.nn` (the op layers' input
adapters among them).

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


def view_of(y, view):
    """One view of ``y`` (rank >= 2) by name: what code mutates in place through (`ViewUpdate`)."""
    if view == "select":
        return y[0]
    if view == "slice":
        return y[:, 1:]
    if view == "view":  # a view needs a contiguous tensor; otherwise the whole tensor
        return y.view(-1) if y.is_contiguous() else y
    if view == "transpose":
        return y.transpose(0, 1)
    if view == "narrow":
        return y.narrow(-1, 0, 1)
    if view == "diagonal":
        return y.diagonal(dim1=0, dim2=1)
    return y.unsqueeze(0)


def update_in_place(v, update):
    """``v`` updated in place by the named update (`ViewUpdate`)."""
    if update == "add_":
        v.add_(0.5)
    elif update == "mul_":
        v.mul_(3)
    elif update == "copy_":  # from a function of v that saves its output, not v (which the copy overwrites)
        v.copy_(v.tanh())
    elif update == "relu_":
        v.relu_()
    else:
        v.sin_()


class ViewUpdate(nn.Module):
    """An in-place update through a view, then a read: ``y = <on>(x); v = <view>(y); v.<update>; return <read>``.

    ``on``: the tensor mutated, a product ``x * 2``, a clone of ``x``, or ``x`` itself (the layer's input);
    ``read``: what the next layer gets, the mutated base ``y`` or ``y + v.sum()`` (the view read again).
    """

    def __init__(self, view: str, update: str, on: str, read: str) -> None:
        super().__init__()
        self.view, self.update, self.on, self.read = view, update, on, read

    def forward(self, x):
        y = x * 2 if self.on == "product" else x.clone() if self.on == "clone" else x
        v = view_of(y, self.view)
        update_in_place(v, self.update)
        return y if self.read == "base" else y + v.sum()


class BufferUpdate(nn.Module):
    """A running mean of the input kept in a buffer and updated in place under ``torch.no_grad()``, as EMA code does;
    the input passes through unchanged.

    The buffer is not read in the forward: eager's checkpoint recomputation updates it a second time, so a
    read would give the recomputed forward other values than the first (eager's own gradient then differs
    with and without the checkpoint, as BatchNorm's would in eval mode if it updated its statistics)."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("mean", torch.zeros(()))

    def forward(self, x):
        with torch.no_grad():
            self.mean.mul_(0.9).add_(0.1 * x.mean())
        return x


def conv_class(dims: int, transposed: bool = False) -> type:
    """``nn.Conv1d/2d/3d`` (or the transposed ones) for ``dims`` spatial dimensions."""
    return ((nn.Conv1d, nn.Conv2d, nn.Conv3d), (nn.ConvTranspose1d, nn.ConvTranspose2d, nn.ConvTranspose3d))[
        transposed
    ][dims - 1]


class ConvBlock(nn.Module):
    """A ResNet / diffusers residual block: GroupNorm, SiLU, 3x3 conv, twice, plus a 1x1 conv skip when the
    channel count changes."""

    def __init__(self, dims: int, channels: int, out_channels: int, groups: int) -> None:
        super().__init__()
        conv = conv_class(dims)
        self.norm_1, self.conv_1 = nn.GroupNorm(groups, channels), conv(channels, out_channels, 3, padding=1)
        self.norm_2, self.conv_2 = nn.GroupNorm(groups, out_channels), conv(out_channels, out_channels, 3, padding=1)
        self.skip = conv(channels, out_channels, 1) if channels != out_channels else nn.Identity()

    def forward(self, x):
        h = self.conv_1(F.silu(self.norm_1(x)))
        h = self.conv_2(F.silu(self.norm_2(h)))
        return self.skip(x) + h


class UNetBlock(nn.Module):
    """A UNet level: stride-2 conv down, a `ConvBlock`, nearest upsampling back to the input's size and a 3x3 conv,
    then the skip connection (concatenated with the input) through a 1x1 conv back to ``channels``."""

    def __init__(self, dims: int, channels: int, hidden: int) -> None:
        super().__init__()
        conv = conv_class(dims)
        self.down = conv(channels, hidden, 3, stride=2, padding=1)
        self.mid = ConvBlock(dims, hidden, hidden, 1)
        self.up = conv(hidden, hidden, 3, padding=1)
        self.out = conv(hidden + channels, channels, 1)

    def forward(self, x):
        h = self.mid(self.down(x))
        h = self.up(F.interpolate(h, size=x.shape[2:], mode="nearest"))
        return self.out(torch.cat([h, x], dim=1))


def adapt(x, shape, low, high, offset=0):
    """``x``'s values from flat position ``offset`` on (zeros past its end), shaped ``shape``, mapped into
    ``(low, high)``. Padding rather than tiling: a tiled input would sum many low-precision gradients."""
    flat = x.reshape(-1)
    count = 1
    for size in shape:
        count *= size
    flat = F.pad(flat, (0, max(0, count + offset - flat.numel())))[offset : offset + count]
    # In float32 (float64 for a float64 input), rounded once: in bfloat16 `low + (high - low) * s`
    # cancels, and eager and thunder round its steps differently. tanh, not sigmoid: thunder's
    # sigmoid gradient is NaN for inputs below about -90 (known issue sigmoid-grad-nan-large-negative).
    wide = flat.reshape(shape).to(torch.promote_types(x.dtype, torch.float32))
    return (low + (high - low) * (torch.tanh(wide) + 1) / 2).to(x.dtype)


def spread(x, shape, low, high):
    """A constant tensor of ``shape`` (no gradient) with values evenly spread over ``[low, high]``, like ``x``.

    Not ``adapt(...).detach()``: thunderfx sends any region holding a detach to its fallback."""
    count = 1
    for size in shape:
        count *= size
    steps = torch.arange(count, device=x.device, dtype=torch.promote_types(x.dtype, torch.float32))
    return (low + (high - low) * steps / max(count - 1, 1)).reshape(shape).to(x.dtype)


def fold(y, like):
    """Every floating tensor of ``y`` (a tensor or a sequence of them), flattened, cut or zero-padded to
    ``like``'s shape."""
    parts = [t.reshape(-1) for t in (y if isinstance(y, (tuple, list)) else (y,)) if t.is_floating_point()]
    flat = torch.cat(parts).to(like.dtype)
    count = like.numel()
    return F.pad(flat, (0, max(0, count - flat.numel())))[:count].reshape(like.shape)
