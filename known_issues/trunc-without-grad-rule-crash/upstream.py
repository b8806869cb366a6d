"""trunc without grad rule crash. Exit 1: the recorded failure shows; 0: it does not; 2: anything else."""
import math, os, re, sys
sys.excepthook = lambda *e: (sys.__excepthook__(*e), os._exit(2))  # exit 2: anything unexpected
import torch
from thunder.dynamo import thunderfx
def adapt(x, shape, low):
    count = math.prod(shape)
    flat = torch.nn.functional.pad(x.reshape(-1), (0, max(0, count + 0 - x.numel())))[0:0 + count]
    wide = flat.reshape(shape).to(torch.promote_types(x.dtype, torch.float32))
    return (low + (8.9727 - low) * (torch.tanh(wide) + 1) / 2).to(x.dtype)
def fold(y, like):
    flat = torch.cat([t.reshape(-1) for t in (y if isinstance(y, (tuple, list)) else (y,)) if t.is_floating_point()])
    return torch.nn.functional.pad(flat.to(like.dtype), (0, max(0, like.numel() - flat.numel())))[:like.numel()].reshape(like.shape)
class Net(torch.nn.Module):
    def forward(self, x):
        v0 = x
        with torch.no_grad():
            v1 = torch.sin(v0)
        v2 = fold(torch.trunc(adapt(v1, (1,), -8.8027)), v1)
        return torch.cat([v2.reshape(-1), v0.reshape(-1)])
torch.manual_seed(3)
net = Net().to(device='cpu', dtype=torch.float32)
generator = torch.Generator().manual_seed(3)
x = torch.randn((1, 1), generator=generator).to(device='cpu', dtype=torch.float32).requires_grad_(True)
cotangent = torch.randn((2,), generator=generator).to(device='cpu', dtype=torch.float32)
RECORDED = 'RuntimeError: Failed to find a gradient transform for bound symbol bsym=t = prims.trunc(to_#)  # t: "cpu f#[#]"'
try:
    thunderfx(net)(x).backward(cotangent)
except Exception as error:  # recorded on thunder 0.2.6: thunderfx raised RuntimeError: Failed to find a gradient transform for bound symbol bsym=t = prims.trunc(to_1)  # t: "cpu f32[1]"
    first = re.sub(r"\{[^{}]*\}", "{...}", (str(error).strip().splitlines() or [""])[0])
    signature = f"{type(error).__name__}: " + re.sub(r"0x[0-9a-fA-F]+|\d+(?:\.\d+)?", "#", first)[:200]
    sys.exit(print(signature) or (1 if signature == RECORDED else 2))
print("thunderfx runs: not reproduced")
