"""hardsigmoid float64 grad imprecise. Exit 1: the recorded failure shows; 0: it does not; 2: anything else."""
import copy, math, os, sys
sys.excepthook = lambda *e: (sys.__excepthook__(*e), os._exit(2))  # exit 2: anything unexpected
import torch
from torch.utils.checkpoint import checkpoint
from thunder.dynamo import thunderfx
def adapt(x, shape, low):
    count = math.prod(shape)
    flat = torch.nn.functional.pad(x.reshape(-1), (0, max(0, count + 0 - x.numel())))[0:0 + count]
    wide = flat.reshape(shape).to(torch.promote_types(x.dtype, torch.float32))
    return (low + (8.8325 - low) * (torch.tanh(wide) + 1) / 2).to(x.dtype)
def fold(y, like):
    flat = torch.cat([t.reshape(-1) for t in (y if isinstance(y, (tuple, list)) else (y,)) if t.is_floating_point()])
    return torch.nn.functional.pad(flat.to(like.dtype), (0, max(0, like.numel() - flat.numel())))[:like.numel()].reshape(like.shape)
class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.layer0 = torch.nn.Hardsigmoid()
    def checkpointed0(self, x):
        return fold(self.layer0(adapt(x, (11,), -5.8407)), x)
    def forward(self, x):
        return checkpoint(self.checkpointed0, x, use_reentrant=False)
torch.manual_seed(1)
net = Net().to(device='cpu', dtype=torch.float64)
generator = torch.Generator().manual_seed(1)
x = torch.randn((2, 4), generator=generator).to(device='cpu', dtype=torch.float64).requires_grad_(True)
cotangent = torch.randn((2, 4), generator=generator).to(device='cpu', dtype=torch.float64)
def run(model, fn):
    x_ = x.detach().requires_grad_(x.requires_grad)
    (out := fn(x_)).backward(cotangent)
    return [out, x_.grad, *(p.grad for p in model.parameters())]
eager = copy.deepcopy(net)
expected = run(eager, eager)
actual = run(net, thunderfx(net))
try:
    torch.testing.assert_close(actual, expected, rtol=1e-09, atol=1e-10)  # the harness's tolerances
except AssertionError as error:  # recorded on thunder 0.2.6: grad of input: max abs diff 3.424e-08 on 3/8 elements (at flat index 5: -1.14875 vs -1.14875; max |eager| 1.149, slack 2.55e-16)
    sys.exit(print(error) or 1)
print("thunderfx matches: not reproduced")
