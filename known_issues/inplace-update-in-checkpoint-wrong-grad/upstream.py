"""inplace update in checkpoint wrong grad. Exit 1: the recorded failure shows; 0: it does not; 2: anything else."""
import copy, os, sys
sys.excepthook = lambda *e: (sys.__excepthook__(*e), os._exit(2))  # exit 2: anything unexpected
import torch
from torch.utils.checkpoint import checkpoint
from thunder.dynamo import thunderfx
class InplaceResidual(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(1, 1)
    def forward(self, x):
        y = self.linear(x)
        y += x
        y.mul_(0.5)
        return y
class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.layer0 = InplaceResidual()
        self.layer1 = torch.nn.ReLU()
    def forward(self, x):
        x = checkpoint(self.layer0, x, use_reentrant=False)
        return self.layer1(x)
torch.manual_seed(0)
net = Net().to(device='cpu', dtype=torch.float32)
generator = torch.Generator().manual_seed(0)
x = torch.randn((1, 1), generator=generator).to(device='cpu', dtype=torch.float32).requires_grad_(True)
cotangent = torch.randn((1, 1), generator=generator).to(device='cpu', dtype=torch.float32)
def run(model, fn):
    x_ = x.detach().requires_grad_(x.requires_grad)
    (out := fn(x_)).backward(cotangent)
    return [out, x_.grad, *(p.grad for p in model.parameters())]
eager = copy.deepcopy(net)
expected = run(eager, eager)
actual = run(net, thunderfx(net))
try:
    torch.testing.assert_close(actual, expected, rtol=0.0001, atol=1e-05)  # the harness's tolerances
except AssertionError as error:  # recorded on thunder 0.2.6: output: max abs diff 1.033 on 1/1 elements (at flat index 0: 2.0659 vs 1.03295; max |float64 eager| 1.033, slack 2.92e-07)
    sys.exit(print(error) or 1)
print("thunderfx matches: not reproduced")
