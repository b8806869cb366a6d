"""instance norm running stats not updated. Exit 1: the recorded failure shows; 0: it does not; 2: anything else."""
import copy, os, sys
sys.excepthook = lambda *e: (sys.__excepthook__(*e), os._exit(2))  # exit 2: anything unexpected
import torch
from thunder.dynamo import thunderfx
torch.manual_seed(0)
net = torch.nn.Sequential(torch.nn.InstanceNorm1d(1, affine=False, track_running_stats=True)).to(device='cpu', dtype=torch.float32)
generator = torch.Generator().manual_seed(0)
x = torch.randn((1, 1, 2), generator=generator).to(device='cpu', dtype=torch.float32).requires_grad_(True)
cotangent = torch.randn((1, 1, 2), generator=generator).to(device='cpu', dtype=torch.float32)
def run(model, fn):
    x_ = x.detach().requires_grad_(x.requires_grad)
    out = fn(x_)
    buffers = [b.clone() for b in model.buffers()]  # after forward
    out.backward(cotangent)
    return [out, x_.grad, *(p.grad for p in model.parameters()), *buffers]
eager = copy.deepcopy(net)
expected = run(eager, eager)
actual = run(net, thunderfx(net))
try:
    torch.testing.assert_close(actual, expected, rtol=0.0001, atol=1e-05)  # the harness's tolerances
except AssertionError as error:  # recorded on thunder 0.2.6: buffer layer0.running_mean after forward: max abs diff 0.06238 on 1/1 elements (at flat index 0: 0 vs 0.0623784; max |float64 eager| 0.06238, slack 1.27e-07)
    sys.exit(print(error) or 1)
print("thunderfx matches: not reproduced")
