"""mish bfloat16 grad inaccurate, reduced by hand. Exit 1: the recorded failure shows; 0: it does not; 2: anything else."""
import os, sys
sys.excepthook = lambda *e: (sys.__excepthook__(*e), os._exit(2))  # exit 2: anything unexpected
import torch
from thunder.dynamo import thunderfx
F = torch.nn.functional
def squash(x):  # x's first 11 values mapped into [-5.97, 8.10], computed in float32
    return (-5.9713 + 14.0677 * (torch.tanh(x.reshape(-1)[:11].float()) + 1) / 2).to(x.dtype)
def pad_to(y, like):
    return F.pad(y, (0, like.numel() - y.numel())).reshape(like.shape)
def f(x):
    x = F.elu(pad_to(F.mish(squash(x)), x))
    x = x * 0.5 + x.mean(dim=-1, keepdim=True)
    x = pad_to(F.mish(squash(x)), x)
    return pad_to(F.mish(squash(x)), x)
torch.manual_seed(374)
weight = torch.nn.Embedding(43, 57).weight.detach()
generator = torch.Generator().manual_seed(374)
x = weight[torch.randint(43, (2,), generator=generator)].to(torch.bfloat16)
cotangent = torch.randn((2, 57), generator=generator).to(torch.bfloat16)
def grad(fn, x, cotangent):
    x_ = x.detach().requires_grad_(True)
    fn(x_).backward(cotangent)
    return x_.grad.double()
reference = grad(f, x.double(), cotangent.double())
def error(g):  # the largest difference from the float64 reference
    return (g - reference).abs().max().item()
eager, thunder = error(grad(f, x, cotangent)), error(grad(thunderfx(f), x, cotangent))
print(f"error against float64: thunderfx {thunder:.3g}, eager {eager:.3g}")
sys.exit(1 if thunder > 2 * eager else 0)  # recorded on thunder 0.2.6: thunderfx 0.0779, eager 0.0187 (4.2x; the entry's network: 0.0779 vs 0.0291)
