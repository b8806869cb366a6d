"""max dim tie grad split. Exit 1: the recorded failure shows; 0: it does not; 2: anything else."""
import copy, math, os, sys
sys.excepthook = lambda *e: (sys.__excepthook__(*e), os._exit(2))  # exit 2: anything unexpected
import torch
from thunder.dynamo import thunderfx
def adapt(x, shape, low, high, offset=0):
    count = math.prod(shape)
    flat = torch.nn.functional.pad(x.reshape(-1), (0, max(0, count + offset - x.numel())))[offset:offset + count]
    wide = flat.reshape(shape).to(torch.promote_types(x.dtype, torch.float32))
    return (low + (high - low) * (torch.tanh(wide) + 1) / 2).to(x.dtype)
def fold(y, like):
    flat = torch.cat([t.reshape(-1) for t in (y if isinstance(y, (tuple, list)) else (y,)) if t.is_floating_point()])
    return torch.nn.functional.pad(flat.to(like.dtype), (0, max(0, like.numel() - flat.numel())))[:like.numel()].reshape(like.shape)
class RMSNorm(torch.nn.Module):
    def __init__(self, eps=1e-06) -> None:
        super().__init__()
        self.eps = eps
        self.weight = torch.nn.Parameter(torch.ones(14))
    def forward(self, x):
        wide = x.to(torch.promote_types(x.dtype, torch.float32))
        norm = wide * torch.rsqrt(wide.pow(2).mean(dim=-1, keepdim=True) + self.eps)
        return norm.to(x.dtype) * self.weight
class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.layer0 = torch.nn.ReLU()
        self.layer2 = RMSNorm()
    def forward(self, x):
        x = self.layer0(x)
        x = fold(adapt(x, (4, 4), -8.8439, 8.9584, 0).to(adapt(x, (2, 2), -2.3905, 8.8586, 1)), x)
        x = self.layer2(x)
        return fold(adapt(x, (2, 3, 1), -1000.0, 1000.0, 0).max(0), x)
torch.manual_seed(24335)
net = Net().to(device='cpu', dtype=torch.float32)
generator = torch.Generator().manual_seed(24335)
x = torch.randn((2, 14), generator=generator).to(device='cpu', dtype=torch.float32).requires_grad_(True)
cotangent = torch.randn((2, 14), generator=generator).to(device='cpu', dtype=torch.float32)
def run(model, fn):
    x_ = x.detach().requires_grad_(x.requires_grad)
    (out := fn(x_)).backward(cotangent)
    return [out, x_.grad, *(p.grad for p in model.parameters())]
eager = copy.deepcopy(net)
expected = run(eager, eager)
actual = run(net, thunderfx(net))
try:
    torch.testing.assert_close(actual, expected, rtol=0.0001, atol=1e-05)  # the harness's tolerances
except AssertionError as error:  # recorded on thunder 0.2.6: grad of layer2.weight: max abs diff 1.729 on 2/14 elements (at flat index 4: -1.72923 vs 0; max |float64 eager| 425.6, slack 0.000869)
    sys.exit(print(error) or 1)
print("thunderfx matches: not reproduced")
