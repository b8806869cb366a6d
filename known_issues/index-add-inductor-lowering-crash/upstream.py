"""index add inductor lowering crash. Exit 1: the recorded failure shows; 0: it does not; 2: anything else."""
import math, os, re, sys
sys.excepthook = lambda *e: (sys.__excepthook__(*e), os._exit(2))  # exit 2: anything unexpected
import torch
from torch.utils.checkpoint import checkpoint
from thunder.dynamo import thunderfx
def adapt(x, shape, low):
    count = math.prod(shape)
    flat = torch.nn.functional.pad(x.reshape(-1), (0, max(0, count + 0 - x.numel())))[0:0 + count]
    wide = flat.reshape(shape).to(torch.promote_types(x.dtype, torch.float32))
    return (low + (8.2407 - low) * (torch.tanh(wide) + 1) / 2).to(x.dtype)
def spread(x, shape, low):
    steps = torch.arange(math.prod(shape), device=x.device, dtype=torch.promote_types(x.dtype, torch.float32))
    return (low + (8.8494 - low) * steps / max(math.prod(shape) - 1, 1)).reshape(shape).to(x.dtype)
def fold(y, like):
    flat = torch.cat([t.reshape(-1) for t in (y if isinstance(y, (tuple, list)) else (y,)) if t.is_floating_point()])
    return torch.nn.functional.pad(flat.to(like.dtype), (0, max(0, like.numel() - flat.numel())))[:like.numel()].reshape(like.shape)
class Net(torch.nn.Module):
    def checkpointed0(self, x):
        return fold(torch.index_add(adapt(x, (4, 2, 3), -6.0328), dim=2, index=torch.tensor(1, dtype=torch.int32, device=x.device), source=spread(x, (4, 2, 1), -7.9953)), x)
    def forward(self, x):
        return checkpoint(self.checkpointed0, x, use_reentrant=False)
torch.manual_seed(12)
net = Net().to(device='cpu', dtype=torch.float32)
generator = torch.Generator().manual_seed(12)
x = torch.randn((2, 4), generator=generator).to(device='cpu', dtype=torch.float32).requires_grad_(True)
cotangent = torch.randn((2, 4), generator=generator).to(device='cpu', dtype=torch.float32)
RECORDED = 'InductorError: LoweringException: AssertionError: '
try:
    thunderfx(net)(x).backward(cotangent)
except Exception as error:  # recorded on thunder 0.2.6: thunderfx raised InductorError: LoweringException: AssertionError: 
    first = re.sub(r"\{[^{}]*\}", "{...}", (str(error).strip().splitlines() or [""])[0])
    signature = f"{type(error).__name__}: " + re.sub(r"0x[0-9a-fA-F]+|\d+(?:\.\d+)?", "#", first)[:200]
    sys.exit(print(signature) or (1 if signature == RECORDED else 2))
print("thunderfx runs: not reproduced")
