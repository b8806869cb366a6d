"""lerp without grad rule crash. Exit 1: the recorded failure shows; 0: it does not; 2: anything else."""
import os, re, sys
sys.excepthook = lambda *e: (sys.__excepthook__(*e), os._exit(2))  # exit 2: anything unexpected
import torch
from thunder.dynamo import thunderfx
class Net(torch.nn.Module):
    def forward(self, x):
        v0 = x
        v1 = v0.detach()
        v2 = v1.lerp(v1, -6.029762268066406)
        return torch.cat([v2.reshape(-1), v0.reshape(-1), v1.reshape(-1)])
torch.manual_seed(5398)
net = Net().to(device='cpu', dtype=torch.float32)
generator = torch.Generator().manual_seed(5398)
x = torch.randn((1, 1), generator=generator).to(device='cpu', dtype=torch.float32).requires_grad_(True)
cotangent = torch.randn((3,), generator=generator).to(device='cpu', dtype=torch.float32)
RECORDED = 'RuntimeError: Failed to find a gradient transform for bound symbol bsym=v# = prims.lerp(v#, v#, -#)  # v#: "cpu f#[#, #]"'
try:
    thunderfx(net)(x).backward(cotangent)
except Exception as error:  # recorded on thunder 0.2.6: thunderfx raised RuntimeError: Failed to find a gradient transform for bound symbol bsym=v2 = prims.lerp(v1, v1, -6.029762268066406)  # v2: "cpu f32[1, 1]"
    first = re.sub(r"\{[^{}]*\}", "{...}", (str(error).strip().splitlines() or [""])[0])
    signature = f"{type(error).__name__}: " + re.sub(r"0x[0-9a-fA-F]+|\d+(?:\.\d+)?", "#", first)[:200]
    sys.exit(print(signature) or (1 if signature == RECORDED else 2))
print("thunderfx runs: not reproduced")
