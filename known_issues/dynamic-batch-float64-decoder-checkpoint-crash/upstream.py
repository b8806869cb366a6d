"""dynamic batch float64 decoder checkpoint crash, reduced by hand. Exit 1: the recorded failure shows; 0: it does not; 2: anything else."""
import os, re, sys
sys.excepthook = lambda *e: (sys.__excepthook__(*e), os._exit(2))  # exit 2: anything unexpected
import torch
from torch.utils.checkpoint import checkpoint
from thunder.dynamo import thunderfx
def attend(x):  # a decoder's attention: heads split off by view + transpose, then SDPA
    b, t, _ = x.shape
    q = x.view(b, t, 2, 1).transpose(1, 2)
    return torch.nn.functional.scaled_dot_product_attention(q, q, q)
def f(x):  # right without the checkpoint (attend(x)) and in float32
    return checkpoint(attend, x, use_reentrant=False)
RECORDED = "RuntimeError: expected scalar type Double but found Float"
try:
    fn = thunderfx(f)
    for batch in (1, 2):  # the second call recompiles with a dynamic batch dimension
        fn(torch.randn(batch, 4, 2, dtype=torch.float64, requires_grad=True)).sum().backward()
except Exception as error:  # recorded on thunder 0.2.6 (the entry's decoder block): RuntimeError: expected scalar type Double but found Float
    first = re.sub(r"\{[^{}]*\}", "{...}", (str(error).strip().splitlines() or [""])[0])
    signature = f"{type(error).__name__}: " + re.sub(r"0x[0-9a-fA-F]+|\d+(?:\.\d+)?", "#", first)[:200]
    sys.exit(print(signature) or (1 if signature == RECORDED else 2))
print("thunderfx runs: not reproduced")
