"""attention bfloat16 grad inaccurate. Exit 1: the recorded failure shows; 0: it does not; 2: anything else."""
import copy, os, sys
sys.excepthook = lambda *e: (sys.__excepthook__(*e), os._exit(2))  # exit 2: anything unexpected
import torch
from thunder.dynamo import thunderfx
class Attention(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.q, self.k, self.v = (torch.nn.Linear(7, 7), torch.nn.Linear(7, 7), torch.nn.Linear(7, 7))
        self.out = torch.nn.Linear(7, 7)
    def forward(self, x):
        single = x.dim() == 2
        if single:
            x = x.unsqueeze(0)
        b, s, d = x.shape
        q, k, v = (proj(x).view(b, s, 7, d // 7).transpose(1, 2) for proj in (self.q, self.k, self.v))
        y = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        y = self.out(y.transpose(1, 2).reshape(b, s, d))
        return y.squeeze(0) if single else y
torch.manual_seed(2)
net = torch.nn.Sequential(Attention(), torch.nn.ReLU(), torch.nn.Linear(7, 7, bias=True), torch.nn.Linear(7, 1, bias=True)).to(device='cpu', dtype=torch.bfloat16)
generator = torch.Generator().manual_seed(2)
x = torch.randn((4, 3, 7), generator=generator).to(device='cpu', dtype=torch.bfloat16).requires_grad_(True)
cotangent = torch.randn((4, 3, 1), generator=generator).to(device='cpu', dtype=torch.bfloat16)
def run(model, fn):
    x_ = x.detach().requires_grad_(x.requires_grad)
    (out := fn(x_)).backward(cotangent)
    return [out, x_.grad, *(p.grad for p in model.parameters())]
eager = copy.deepcopy(net)
expected = run(eager, eager)
actual = run(net, thunderfx(net))
try:
    torch.testing.assert_close(actual, expected, rtol=0.008, atol=0.008)  # the harness's tolerances
except AssertionError as error:  # recorded on thunder 0.2.6: grad of input: systematic scale error: thunderfx ~ 0.985747 x float64 eager (least squares over 84 elements; eager's own factor 1.00047, relative noise 0.003...
    sys.exit(print(error) or 1)
print("thunderfx matches: not reproduced")
