"""repeated region output assertion. Exit 1: the recorded failure shows; 0: it does not; 2: anything else."""
import os, re, sys
sys.excepthook = lambda *e: (sys.__excepthook__(*e), os._exit(2))  # exit 2: anything unexpected
import torch
from torch.utils.checkpoint import checkpoint
from thunder.dynamo import thunderfx
class Net(torch.nn.Module):
    def region0(self, v0):
        v1 = v0.clone()
        v1[:, 39:54] = v0[:, 39:54]
        v2 = v1
        return (v1, v2)
    def forward(self, x):
        v0 = x
        v1, v2 = checkpoint(self.region0, v0, use_reentrant=False)
        v3 = torch.cat([v2.narrow(-1, 30, v2.shape[-1] - 30), v2.narrow(-1, 0, 30)], dim=-1)
        return torch.cat([v3.reshape(-1), v2.reshape(-1), v1.reshape(-1)])
torch.manual_seed(4825)
net = Net().to(device='cpu', dtype=torch.float32)
generator = torch.Generator().manual_seed(4825)
x = torch.randn((1, 54), generator=generator).to(device='cpu', dtype=torch.float32).requires_grad_(True)
cotangent = torch.randn((162,), generator=generator).to(device='cpu', dtype=torch.float32)
RECORDED = 'AssertionError: '
try:
    thunderfx(net)(x).backward(cotangent)
except Exception as error:  # recorded on thunder 0.2.6: thunderfx raised AssertionError: 
    first = re.sub(r"\{[^{}]*\}", "{...}", (str(error).strip().splitlines() or [""])[0])
    signature = f"{type(error).__name__}: " + re.sub(r"0x[0-9a-fA-F]+|\d+(?:\.\d+)?", "#", first)[:200]
    sys.exit(print(signature) or (1 if signature == RECORDED else 2))
print("thunderfx runs: not reproduced")
