"""inplace view then view read crash. Exit 1: the recorded failure shows; 0: it does not; 2: anything else."""
import os, re, sys
sys.excepthook = lambda *e: (sys.__excepthook__(*e), os._exit(2))  # exit 2: anything unexpected
import torch
from thunder.dynamo import thunderfx
def view_of(y):
    return y[0]
def update_in_place(v):
    v.add_(0.5)
class ViewUpdate(torch.nn.Module):
    def forward(self, x):
        y = x * 2
        v = view_of(y)
        update_in_place(v)
        return y + v.sum()
torch.manual_seed(0)
net = torch.nn.Sequential(ViewUpdate()).to(device='cpu', dtype=torch.float32)
generator = torch.Generator().manual_seed(0)
x = torch.randn((2, 2), generator=generator).to(device='cpu', dtype=torch.float32).requires_grad_(True)
cotangent = torch.randn((2, 2), generator=generator).to(device='cpu', dtype=torch.float32)
RECORDED = 'RuntimeError: expand: the requested shape has too few dimensions!'
try:
    thunderfx(net)(x).backward(cotangent)
except Exception as error:  # recorded on thunder 0.2.6: thunderfx raised RuntimeError: expand: the requested shape has too few dimensions!
    first = re.sub(r"\{[^{}]*\}", "{...}", (str(error).strip().splitlines() or [""])[0])
    signature = f"{type(error).__name__}: " + re.sub(r"0x[0-9a-fA-F]+|\d+(?:\.\d+)?", "#", first)[:200]
    sys.exit(print(signature) or (1 if signature == RECORDED else 2))
print("thunderfx runs: not reproduced")
