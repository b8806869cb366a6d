"""dynamic batch output count crash. Exit 1: the recorded failure shows; 0: it does not; 2: anything else."""
import math, os, re, sys
sys.excepthook = lambda *e: (sys.__excepthook__(*e), os._exit(2))  # exit 2: anything unexpected
import torch
from thunder.dynamo import thunderfx
def adapt(x, shape, low):
    count = math.prod(shape)
    flat = torch.nn.functional.pad(x.reshape(-1), (0, max(0, count + 0 - x.numel())))[0:0 + count]
    wide = flat.reshape(shape).to(torch.promote_types(x.dtype, torch.float32))
    return (low + (5.1318 - low) * (torch.tanh(wide) + 1) / 2).to(x.dtype)
def fold(y, like):
    flat = torch.cat([t.reshape(-1) for t in (y if isinstance(y, (tuple, list)) else (y,)) if t.is_floating_point()])
    return torch.nn.functional.pad(flat.to(like.dtype), (0, max(0, like.numel() - flat.numel())))[:like.numel()].reshape(like.shape)
class Net(torch.nn.Module):
    def forward(self, x):
        return fold((adapt(x, (11,), -7.8569),), x)
torch.manual_seed(0)
net = Net().to(device='cpu', dtype=torch.float32)
def run(model, fn):
    optimizer = torch.optim.SGD(list(model.parameters()) or [torch.zeros(0)], lr=1e-2, momentum=0.9)
    for step, (shape, out_shape) in enumerate([((1, 1), (1, 1)), ((2, 1), (2, 1))]):
        generator = torch.Generator().manual_seed(0 + step)
        x_, cotangent_ = torch.randn(shape, generator=generator).to(device='cpu', dtype=torch.float32).requires_grad_(True), torch.randn(out_shape, generator=generator).to(device='cpu', dtype=torch.float32)
        optimizer.zero_grad()
        (out := fn(x_)).backward(cotangent_)
        optimizer.step()
    return [out, x_.grad, *(p.detach() for p in model.parameters()), *(b.clone() for b in model.buffers())]
RECORDED = 'AssertionError: '
try:
    run(net, thunderfx(net))
except Exception as error:  # recorded on thunder 0.2.6: thunderfx raised AssertionError: 
    first = re.sub(r"\{[^{}]*\}", "{...}", (str(error).strip().splitlines() or [""])[0])
    signature = f"{type(error).__name__}: " + re.sub(r"0x[0-9a-fA-F]+|\d+(?:\.\d+)?", "#", first)[:200]
    sys.exit(print(signature) or (1 if signature == RECORDED else 2))
print("thunderfx runs: not reproduced")
