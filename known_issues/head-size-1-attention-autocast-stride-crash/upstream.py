"""head size 1 attention autocast stride crash. Exit 1: the recorded failure shows; 0: it does not; 2: anything else."""
import os, re, sys
sys.excepthook = lambda *e: (sys.__excepthook__(*e), os._exit(2))  # exit 2: anything unexpected
import torch
from thunder.dynamo import thunderfx
class Attention(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.q, self.k, self.v = (torch.nn.Linear(2, 2), torch.nn.Linear(2, 2), torch.nn.Linear(2, 2))
        self.out = torch.nn.Linear(2, 2)
    def forward(self, x):
        single = x.dim() == 2
        if single:
            x = x.unsqueeze(0)
        b, s, d = x.shape
        q, k, v = (proj(x).view(b, s, 2, d // 2).transpose(1, 2) for proj in (self.q, self.k, self.v))
        y = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=False)
        y = self.out(y.transpose(1, 2).reshape(b, s, d))
        return y.squeeze(0) if single else y
class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.layer0 = Attention()
    def forward(self, x):
        with torch.autocast('cpu', dtype=torch.bfloat16):
            x = self.layer0(x)
        return x
torch.manual_seed(0)
net = Net().to(device='cpu', dtype=torch.float32)
generator = torch.Generator().manual_seed(0)
x = torch.randn((2, 2), generator=generator).to(device='cpu', dtype=torch.float32).requires_grad_(True)
cotangent = torch.randn((2, 2), generator=generator).to(device='cpu', dtype=torch.float32)
RECORDED = 'AssertionError: expected size #==#, stride #==# at dim=#; expected size #==#, stride #==# at dim=#'
try:
    thunderfx(net)(x).backward(cotangent)
except Exception as error:  # recorded on thunder 0.2.6: thunderfx raised AssertionError: expected size 2==2, stride 1==2 at dim=1; expected size 2==2, stride 2==1 at dim=2
    first = re.sub(r"\{[^{}]*\}", "{...}", (str(error).strip().splitlines() or [""])[0])
    signature = f"{type(error).__name__}: " + re.sub(r"0x[0-9a-fA-F]+|\d+(?:\.\d+)?", "#", first)[:200]
    sys.exit(print(signature) or (1 if signature == RECORDED else 2))
print("thunderfx runs: not reproduced")
