"""conv bias of another dtype promotes output. Exit 1: the recorded failure shows; 0: it does not; 2: anything else."""
import copy, math, os, sys
sys.excepthook = lambda *e: (sys.__excepthook__(*e), os._exit(2))  # exit 2: anything unexpected
import torch
from torch.utils.checkpoint import checkpoint
from thunder.dynamo import thunderfx
def adapt(x, shape, low, high, offset=0):
    count = math.prod(shape)
    flat = torch.nn.functional.pad(x.reshape(-1), (0, max(0, count + offset - x.numel())))[offset:offset + count]
    wide = flat.reshape(shape).to(torch.promote_types(x.dtype, torch.float32))
    return (low + (high - low) * (torch.tanh(wide) + 1) / 2).to(x.dtype)
def fold(y, like):
    flat = torch.cat([t.reshape(-1) for t in (y if isinstance(y, (tuple, list)) else (y,)) if t.is_floating_point()])
    return torch.nn.functional.pad(flat.to(like.dtype), (0, max(0, like.numel() - flat.numel())))[:like.numel()].reshape(like.shape)
class Net(torch.nn.Module):
    def checkpointed0(self, x):
        return fold(torch.conv2d(adapt(x, (1, 4, 5, 5), -8.7459, 7.962, 0), adapt(x, (1, 4, 2, 3), -7.7569, 8.4704, 1), adapt(x, (1,), -5.6553, -5.6553, 2).to(torch.float64), padding='valid', stride=2), x)
    def forward(self, x):
        return checkpoint(self.checkpointed0, x, use_reentrant=False)
torch.manual_seed(12)
net = Net().to(device='cpu', dtype=torch.float32)
generator = torch.Generator().manual_seed(12)
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
except AssertionError as error:  # recorded on thunder 0.2.6: output: shape/dtype (1, 1)/torch.float64 != (1, 1)/torch.float32
    sys.exit(print(error) or 1)
print("thunderfx matches: not reproduced")
