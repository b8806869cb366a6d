"""max dim tie grad split, reduced by hand. Exit 1: the recorded failure shows; 0: it does not; 2: anything else."""
import os, sys
sys.excepthook = lambda *e: (sys.__excepthook__(*e), os._exit(2))  # exit 2: anything unexpected
import torch
from thunder.dynamo import thunderfx
def f(x):  # column 0 holds a tie: x[0, 0] == x[1, 0]
    return torch.max(x, dim=0).values
x = torch.tensor([[1.0, 3.0], [1.0, 2.0]])
def run(fn):
    x_ = x.detach().requires_grad_(True)
    (out := fn(x_)).backward(torch.ones(2))
    return [out, x_.grad]
expected = run(f)  # eager: each column's gradient goes whole to the index max returns (x.grad [[1, 1], [0, 0]])
actual = run(thunderfx(f))
try:
    torch.testing.assert_close(actual, expected, rtol=0.0001, atol=1e-05)  # the harness's tolerances
except AssertionError as error:  # recorded on thunder 0.2.6: x.grad [[0.5, 1], [0.5, 0]] (the entry's network: a weight's grad 1.729 off)
    sys.exit(print(error) or 1)
print("thunderfx matches: not reproduced")
