"""aliased inputs of two shapes update crash. Exit 1: the recorded failure shows; 0: it does not; 2: anything else."""
import os, re, sys
sys.excepthook = lambda *e: (sys.__excepthook__(*e), os._exit(2))  # exit 2: anything unexpected
import torch
from thunder.dynamo import thunderfx
class Net(torch.nn.Module):
    def forward(self, x, v1, v2, v3):
        v0 = x
        v4 = v1.view_as(v1)
        v5 = v4.add_(v4)
        return torch.cat([v5.reshape(-1), v4.reshape(-1), v2.reshape(-1), v0.reshape(-1)])
torch.manual_seed(0)
net = Net().to(device='cpu', dtype=torch.float32)
generator = torch.Generator().manual_seed(0)
x = torch.randn((2, 58), generator=generator).to(device='cpu', dtype=torch.float32).requires_grad_(True)
v1 = torch.randn((2, 58), generator=generator).to(device='cpu', dtype=torch.float32).requires_grad_(False)
v2 = v1[:, 0:26]
v3 = x[:, 0:1]
x = (x, v1, v2, v3)
cotangent = torch.randn((400,), generator=generator).to(device='cpu', dtype=torch.float32)
def fresh(inputs, dtype=None):  # copies; an input that views another views its copy
    c = {id(t): t.detach().to(dtype).clone().requires_grad_(t.requires_grad) for t in inputs if t._base is None}
    return [c[id(t)] if t._base is None else c[id(t._base)].as_strided(t.size(), t.stride(), t.storage_offset()) for t in inputs]
def run(model, fn):
    xs = fresh(x)
    out = fn(*xs)
    state = [*(t.detach().clone() for t in xs), *(t.requires_grad for t in xs), out.requires_grad]
    out.backward(cotangent)
    return [out, *(t.grad if t.is_leaf else None for t in xs), *(p.grad for p in model.parameters()), *state]
RECORDED = 'RuntimeError: Attempting to reshape a.shape=(#, #) to shape=(#, #), but a.numel=# is different from the number of elements in shape, #'
try:
    run(net, thunderfx(net))
except Exception as error:  # recorded on thunder 0.2.6: thunderfx raised RuntimeError: Attempting to reshape a.shape=(2, 58) to shape=(2, 26), but a.numel=116 is different from the number of elements in shape, 52
    first = re.sub(r"\{[^{}]*\}", "{...}", (str(error).strip().splitlines() or [""])[0])
    signature = f"{type(error).__name__}: " + re.sub(r"0x[0-9a-fA-F]+|\d+(?:\.\d+)?", "#", first)[:200]
    sys.exit(print(signature) or (1 if signature == RECORDED else 2))
print("thunderfx runs: not reproduced")
