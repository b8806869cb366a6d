"""copysign sign source loses grad. Exit 1: the recorded failure shows; 0: it does not; 2: anything else."""
import os, re, sys
sys.excepthook = lambda *e: (sys.__excepthook__(*e), os._exit(2))  # exit 2: anything unexpected
import torch
from thunder.dynamo import thunderfx
class Net(torch.nn.Module):
    def forward(self, x, v1):
        v0 = x
        v2 = v1.copysign(v0)
        return v2.reshape(-1)
torch.manual_seed(0)
net = Net().to(device='cpu', dtype=torch.float32)
generator = torch.Generator().manual_seed(0)
x = torch.randn((1, 1), generator=generator).to(device='cpu', dtype=torch.float32).requires_grad_(True)
v1 = torch.randn((1, 1), generator=generator).to(device='cpu', dtype=torch.float32).requires_grad_(False)
x = (x, v1)
cotangent = torch.randn((1,), generator=generator).to(device='cpu', dtype=torch.float32)
def fresh(inputs, dtype=None):  # copies; an input that views another views its copy
    c = {id(t): t.detach().to(dtype).clone().requires_grad_(t.requires_grad) for t in inputs if t._base is None}
    return [c[id(t)] if t._base is None else c[id(t._base)].as_strided(t.size(), t.stride(), t.storage_offset()) for t in inputs]
def run(model, fn):
    xs = fresh(x)
    out = fn(*xs)
    state = [*(t.detach().clone() for t in xs), *(t.requires_grad for t in xs), out.requires_grad]
    out.backward(cotangent)
    return [out, *(t.grad if t.is_leaf else None for t in xs), *(p.grad for p in model.parameters()), *state]
RECORDED = 'RuntimeError: element # of tensors does not require grad and does not have a grad_fn'
try:
    run(net, thunderfx(net))
except Exception as error:  # recorded on thunder 0.2.6: thunderfx raised RuntimeError: element 0 of tensors does not require grad and does not have a grad_fn
    first = re.sub(r"\{[^{}]*\}", "{...}", (str(error).strip().splitlines() or [""])[0])
    signature = f"{type(error).__name__}: " + re.sub(r"0x[0-9a-fA-F]+|\d+(?:\.\d+)?", "#", first)[:200]
    sys.exit(print(signature) or (1 if signature == RECORDED else 2))
print("thunderfx runs: not reproduced")
