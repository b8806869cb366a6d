"""std negative correction fake tensor crash. Exit 1: the recorded failure shows; 0: it does not; 2: anything else."""
import math, os, re, sys
sys.excepthook = lambda *e: (sys.__excepthook__(*e), os._exit(2))  # exit 2: anything unexpected
import torch
from torch.utils.checkpoint import checkpoint
from thunder.dynamo import thunderfx
def adapt(x, shape, low):
    count = math.prod(shape)
    flat = torch.nn.functional.pad(x.reshape(-1), (0, max(0, count + 0 - x.numel())))[0:0 + count]
    wide = flat.reshape(shape).to(torch.promote_types(x.dtype, torch.float32))
    return (low + (3.0 - low) * (torch.tanh(wide) + 1) / 2).to(x.dtype)
def fold(y, like):
    flat = torch.cat([t.reshape(-1) for t in (y if isinstance(y, (tuple, list)) else (y,)) if t.is_floating_point()])
    return torch.nn.functional.pad(flat.to(like.dtype), (0, max(0, like.numel() - flat.numel())))[:like.numel()].reshape(like.shape)
class Net(torch.nn.Module):
    def checkpointed0(self, x):
        return fold(torch.std(adapt(x, (5,), -1.0), 0, correction=-1, keepdim=False), x)
    def forward(self, x):
        return checkpoint(self.checkpointed0, x, use_reentrant=False)
torch.manual_seed(0)
net = Net().to(device='cpu', dtype=torch.float32)
generator = torch.Generator().manual_seed(0)
x = torch.randn((2, 8), generator=generator).to(device='cpu', dtype=torch.float32).requires_grad_(True)
cotangent = torch.randn((2, 8), generator=generator).to(device='cpu', dtype=torch.float32)
RECORDED = "TorchRuntimeError: Dynamo failed to run FX node with fake tensors: call_function <built-in method std of type object at #>(*(FakeTensor(..., size=(#,), grad_fn=<AddBackward#>), #), **{...}): got ValueError('correction a"
try:
    thunderfx(net)(x).backward(cotangent)
except Exception as error:  # recorded on thunder 0.2.6: thunderfx raised TorchRuntimeError: Dynamo failed to run FX node with fake tensors: call_function <built-in method std of type object at 0x7fa8155e7a60>(*(Fa...
    first = re.sub(r"\{[^{}]*\}", "{...}", (str(error).strip().splitlines() or [""])[0])
    signature = f"{type(error).__name__}: " + re.sub(r"0x[0-9a-fA-F]+|\d+(?:\.\d+)?", "#", first)[:200]
    sys.exit(print(signature) or (1 if signature == RECORDED else 2))
print("thunderfx runs: not reproduced")
