"""dynamic batch float64 decoder checkpoint crash. Exit 1: the recorded failure shows; 0: it does not; 2: anything else."""
import os, re, sys
sys.excepthook = lambda *e: (sys.__excepthook__(*e), os._exit(2))  # exit 2: anything unexpected
import functools
import torch
from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import CheckpointImpl, apply_activation_checkpointing, checkpoint_wrapper
from thunder.dynamo import thunderfx
class RMSNorm(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.weight = torch.nn.Parameter(torch.ones(2))
    def forward(self, x):
        wide = x.to(torch.promote_types(x.dtype, torch.float32))
        norm = wide * torch.rsqrt(wide.pow(2).mean(dim=-1, keepdim=True) + 1e-05)
        return norm.to(x.dtype) * self.weight
class CausalSelfAttention(torch.nn.Module):
    def __init__(self, rope_base=10000) -> None:
        super().__init__()
        self.heads, self.query_groups, self.head_size = (2, 2, 2 // 2)
        self.rope_n_elem = self.head_size // 2 * 2
        self.rope_base = rope_base
        self.qkv = torch.nn.Linear(2, (2 + 2 * 2) * self.head_size, bias=False)
        self.proj = torch.nn.Linear(2 * self.head_size, 2, bias=False)
    def rope_cache(self, seq: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
        n_elem = self.rope_n_elem
        theta = 1.0 / self.rope_base ** (torch.arange(0, n_elem, 2, device=device).float() / n_elem)
        idx_theta = torch.outer(torch.arange(seq, device=device).float(), theta).repeat(1, 2)
        return (torch.cos(idx_theta), torch.sin(idx_theta))
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
        hs, kv_size = (self.head_size, self.query_groups * self.head_size)
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
        y = torch.nn.functional.scaled_dot_product_attention(q, k, v, dropout_p=0.0, scale=1.0 / hs ** 0.5, is_causal=True)
        y = self.proj(y.transpose(1, 2).reshape(b, t, hs * self.heads))
        return y.squeeze(0) if single else y
class SwiGLU(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc_1 = torch.nn.Linear(2, 1, bias=False)
        self.fc_2 = torch.nn.Linear(2, 1, bias=False)
        self.proj = torch.nn.Linear(1, 2, bias=False)
    def forward(self, x):
        return self.proj(torch.nn.functional.silu(self.fc_1(x)) * self.fc_2(x))
class DecoderBlock(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.norm_1, self.norm_2 = (RMSNorm(), RMSNorm())
        self.attn = CausalSelfAttention()
        self.mlp = SwiGLU()
    def forward(self, x):
        x = self.attn(self.norm_1(x)) + x
        return self.mlp(self.norm_2(x)) + x
class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Embedding(2, 2)
        self.layer0 = DecoderBlock()
    def forward(self, x):
        x = self.embed(x)
        return self.layer0(x)
torch.manual_seed(0)
net = Net().to(device='cpu', dtype=torch.float64)
targets = [net.layer0]
apply_activation_checkpointing(net, checkpoint_wrapper_fn=functools.partial(checkpoint_wrapper, checkpoint_impl=CheckpointImpl.NO_REENTRANT), check_fn=lambda m: m is targets[0])
def run(model, fn):
    optimizer = torch.optim.SGD(list(model.parameters()) or [torch.zeros(0)], lr=1e-2, momentum=0.9)
    for step, (shape, out_shape) in enumerate([((1, 16), (1, 16, 2)), ((2, 16), (2, 16, 2))]):
        generator = torch.Generator().manual_seed(0 + step)
        x_, cotangent_ = torch.randint(2, shape, generator=generator).to('cpu'), torch.randn(out_shape, generator=generator).to(device='cpu', dtype=torch.float64)
        optimizer.zero_grad()
        (out := fn(x_)).backward(cotangent_)
        optimizer.step()
    return [out, x_.grad, *(p.detach() for p in model.parameters()), *(b.clone() for b in model.buffers())]
RECORDED = 'RuntimeError: expected scalar type Double but found Float'
try:
    run(net, thunderfx(net))
except Exception as error:  # recorded on thunder 0.2.6: thunderfx raised RuntimeError: expected scalar type Double but found Float
    first = re.sub(r"\{[^{}]*\}", "{...}", (str(error).strip().splitlines() or [""])[0])
    signature = f"{type(error).__name__}: " + re.sub(r"0x[0-9a-fA-F]+|\d+(?:\.\d+)?", "#", first)[:200]
    sys.exit(print(signature) or (1 if signature == RECORDED else 2))
print("thunderfx runs: not reproduced")
