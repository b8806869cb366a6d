"""inference mode in checkpoint fallback crash. Exit 1: the recorded failure shows; 0: it does not; 2: anything else."""
import os, re, sys
sys.excepthook = lambda *e: (sys.__excepthook__(*e), os._exit(2))  # exit 2: anything unexpected
import torch
from torch.utils.checkpoint import checkpoint
from thunder.dynamo import thunderfx
class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.layer0 = torch.nn.Linear(4, 4, bias=True)
        self.layer1 = torch.nn.Tanh()
    def region0(self, v0):
        with torch.inference_mode():
            v1 = self.layer0(v0)
        v1 = v1.clone()
        return self.layer1(v0)
    def forward(self, x):
        v0 = x
        v2 = checkpoint(self.region0, v0, use_reentrant=False)
        return v2.reshape(-1)
torch.manual_seed(0)
net = Net().to(device='cpu', dtype=torch.float32)
generator = torch.Generator().manual_seed(0)
x = torch.randn((2, 4), generator=generator).to(device='cpu', dtype=torch.float32).requires_grad_(True)
cotangent = torch.randn((8,), generator=generator).to(device='cpu', dtype=torch.float32)
RECORDED = "RuntimeError: <weakref at #; to 'torch.storage.UntypedStorage' at #>"
try:
    thunderfx(net)(x).backward(cotangent)
except Exception as error:  # recorded on thunder 0.2.6: thunderfx raised BackendCompilerFailed: backend='<thunder.dynamo.compiler.ThunderCompiler object at 0x7fc4a77ee990>' raised:
    name, text = type(error).__name__, str(error)
    if name == "BackendCompilerFailed":
        name, text = [line for line in text.splitlines() if line.strip()][1].split(": ", 1)
    first = re.sub(r"\{[^{}]*\}", "{...}", (text.strip().splitlines() or [""])[0])
    signature = f"{name}: " + re.sub(r"0x[0-9a-fA-F]+|\d+(?:\.\d+)?", "#", first)[:200]
    sys.exit(print(signature) or (1 if signature == RECORDED else 2))
print("thunderfx runs: not reproduced")
