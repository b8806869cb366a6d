"""inference mode region crash. Exit 1: the recorded failure shows; 0: it does not; 2: anything else."""
import os, re, sys
sys.excepthook = lambda *e: (sys.__excepthook__(*e), os._exit(2))  # exit 2: anything unexpected
import torch
from thunder.dynamo import thunderfx
class Net(torch.nn.Module):
    def forward(self, x):
        v0 = x
        with torch.inference_mode():
            v1 = v0.clone()
        v1 = v1.clone()
        return torch.cat([v1.reshape(-1), v0.reshape(-1)])
torch.manual_seed(0)
net = Net().to(device='cpu', dtype=torch.float32)
generator = torch.Generator().manual_seed(0)
x = torch.randn((1, 1), generator=generator).to(device='cpu', dtype=torch.float32).requires_grad_(True)
cotangent = torch.randn((2,), generator=generator).to(device='cpu', dtype=torch.float32)
RECORDED = "NotImplementedError: argument of type: <class 'torch._C._InferenceMode'>"
try:
    thunderfx(net)(x).backward(cotangent)
except Exception as error:  # recorded on thunder 0.2.6: thunderfx raised BackendCompilerFailed: backend='<thunder.dynamo.compiler.ThunderCompiler object at 0x7f2b050ccfd0>' raised:
    name, text = type(error).__name__, str(error)
    if name == "BackendCompilerFailed":
        name, text = [line for line in text.splitlines() if line.strip()][1].split(": ", 1)
    first = re.sub(r"\{[^{}]*\}", "{...}", (text.strip().splitlines() or [""])[0])
    signature = f"{name}: " + re.sub(r"0x[0-9a-fA-F]+|\d+(?:\.\d+)?", "#", first)[:200]
    sys.exit(print(signature) or (1 if signature == RECORDED else 2))
print("thunderfx runs: not reproduced")
