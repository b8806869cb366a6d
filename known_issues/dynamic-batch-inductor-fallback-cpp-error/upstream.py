"""dynamic batch inductor fallback cpp error. Exit 1: the recorded failure shows; 0: it does not; 2: anything else."""
import math, os, re, sys
sys.excepthook = lambda *e: (sys.__excepthook__(*e), os._exit(2))  # exit 2: anything unexpected
import torch
from torch.utils.checkpoint import checkpoint
from thunder.dynamo import thunderfx
def adapt(x, shape, low):
    count = math.prod(shape)
    flat = torch.nn.functional.pad(x.reshape(-1), (0, max(0, count + 0 - x.numel())))[0:0 + count]
    wide = flat.reshape(shape).to(torch.promote_types(x.dtype, torch.float32))
    return (low + (0.4806 - low) * (torch.tanh(wide) + 1) / 2).to(x.dtype)
def fold(y, like):
    flat = torch.cat([t.reshape(-1) for t in (y if isinstance(y, (tuple, list)) else (y,)) if t.is_floating_point()])
    return torch.nn.functional.pad(flat.to(like.dtype), (0, max(0, like.numel() - flat.numel())))[:like.numel()].reshape(like.shape)
class Net(torch.nn.Module):
    def checkpointed0(self, x):
        x = fold(adapt(x, (5,), -1.5611).sum(None, dtype=None, keepdim=True), x)
        return (x, x.mean(dim=-1, keepdim=True))
    def forward(self, x):
        x, aux = checkpoint(self.checkpointed0, x, use_reentrant=False, determinism_check='none')
        return x + aux
torch.manual_seed(2441)
net = Net().to(device='cpu', dtype=torch.float32)
def run(model, fn):
    optimizer = torch.optim.SGD(list(model.parameters()) or [torch.zeros(0)], lr=1e-2, momentum=0.9)
    for step, (shape, out_shape) in enumerate([((1, 2), (1, 2)), ((2, 2), (2, 2))]):
        generator = torch.Generator().manual_seed(2441 + step)
        x_, cotangent_ = torch.randn(shape, generator=generator).to(device='cpu', dtype=torch.float32).requires_grad_(True), torch.randn(out_shape, generator=generator).to(device='cpu', dtype=torch.float32)
        optimizer.zero_grad()
        (out := fn(x_)).backward(cotangent_)
        optimizer.step()
    return [out, x_.grad, *(p.detach() for p in model.parameters()), *(b.clone() for b in model.buffers())]
RECORDED = 'InductorError: CppCompileError: C++ compile error'
try:
    run(net, thunderfx(net))
except Exception as error:  # recorded on thunder 0.2.6: thunderfx raised InductorError: CppCompileError: C++ compile error
    first = re.sub(r"\{[^{}]*\}", "{...}", (str(error).strip().splitlines() or [""])[0])
    signature = f"{type(error).__name__}: " + re.sub(r"0x[0-9a-fA-F]+|\d+(?:\.\d+)?", "#", first)[:200]
    sys.exit(print(signature) or (1 if signature == RECORDED else 2))
print("thunderfx runs: not reproduced")
