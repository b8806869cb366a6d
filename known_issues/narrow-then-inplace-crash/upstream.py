"""narrow then inplace crash. Exit 1: the recorded failure shows; 0: it does not; 2: anything else."""
import os, re, sys
sys.excepthook = lambda *e: (sys.__excepthook__(*e), os._exit(2))  # exit 2: anything unexpected
import torch
from thunder.dynamo import thunderfx
class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.layer1 = torch.nn.Sequential(torch.nn.Linear(1, 1), torch.nn.ReLU(inplace=True))
    def forward(self, x):
        x = torch.cat([x.narrow(-1, 0, x.shape[-1] - 0), x.narrow(-1, 0, 0)], dim=-1)
        return self.layer1(x)
torch.manual_seed(0)
net = Net().to(device='cpu', dtype=torch.float32)
generator = torch.Generator().manual_seed(0)
x = torch.randn((1, 1), generator=generator).to(device='cpu', dtype=torch.float32).requires_grad_(True)
cotangent = torch.randn((1, 1), generator=generator).to(device='cpu', dtype=torch.float32)
RECORDED = 'RuntimeError: Attempting to reshape a.shape=(#, #) to shape=(#, #), but a.numel=# is different from the number of elements in shape, #'
try:
    thunderfx(net)(x).backward(cotangent)
except Exception as error:  # recorded on thunder 0.2.6: thunderfx raised RuntimeError: Attempting to reshape a.shape=(1, 1) to shape=(1, 0), but a.numel=1 is different from the number of elements in shape, 0
    first = re.sub(r"\{[^{}]*\}", "{...}", (str(error).strip().splitlines() or [""])[0])
    signature = f"{type(error).__name__}: " + re.sub(r"0x[0-9a-fA-F]+|\d+(?:\.\d+)?", "#", first)[:200]
    sys.exit(print(signature) or (1 if signature == RECORDED else 2))
print("thunderfx runs: not reproduced")
