"""dropout in checkpoint fresh mask. Exit 1: the recorded failure shows; 0: it does not; 2: anything else."""
import os, sys
sys.excepthook = lambda *e: (sys.__excepthook__(*e), os._exit(2))  # exit 2: anything unexpected
import torch
from torch.utils.checkpoint import checkpoint
from thunder.dynamo import thunderfx
class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.layer0 = torch.nn.Dropout(0.5)
    def checkpointed0(self, x):
        return self.layer0(x)
    def forward(self, x):
        return checkpoint(self.checkpointed0, x, use_reentrant=False)
class PlainNet(Net):
    def forward(self, x):
        return self.checkpointed0(x)
def make_example(checkpointing=True):
    torch.manual_seed(0)
    net = (Net if checkpointing else PlainNet)().to(device='cpu', dtype=torch.float32)
    generator = torch.Generator().manual_seed(0)
    x = torch.randn((2, 8), generator=generator).to(device='cpu', dtype=torch.float32).requires_grad_(True)
    cotangent = torch.randn((2, 8), generator=generator).to(device='cpu', dtype=torch.float32)
    return (net, x, cotangent)
def run(model, fn):
    x_ = x.detach().requires_grad_(x.requires_grad)
    torch.manual_seed(0)  # the same random numbers in each run
    (out := fn(x_)).backward(cotangent)
    return [out, x_.grad, *(p.grad for p in model.parameters())]
net, x, cotangent = make_example(True)
plain = make_example(False)[0]
expected = run(plain, thunderfx(plain))
actual = run(net, thunderfx(net))
try:
    torch.testing.assert_close(actual, expected, rtol=0.0001, atol=1e-05)  # the harness's tolerances
except AssertionError as error:  # recorded on thunder 0.2.6: judged against thunderfx without checkpoints
    sys.exit(print(error) or 1)
print("thunderfx matches: not reproduced")
