"""batch norm stats saved in checkpoint, reduced by hand. Exit 1: the recorded failure shows; 0: it does not; 2: anything else."""
import os, sys
sys.excepthook = lambda *e: (sys.__excepthook__(*e), os._exit(2))  # exit 2: anything unexpected
import thunder
import torch
import torch.nn.functional as F
from thunder.dynamo import thunderfx
from torch.utils.checkpoint import checkpoint

def body(x):
    return F.batch_norm(torch.tanh(x), torch.zeros(3), torch.ones(3), training=True, momentum=0.2).sin()

compiled = thunderfx(lambda x: checkpoint(body, x, use_reentrant=False))
x = torch.randn(2, 3, 4, requires_grad=True)
compiled(x).sum().backward()
(fn,) = compiled._backend.subgraph_infos[0].thunder_compiled_fns
forward = thunder.last_traces(fn)[-1]
saved = forward.bound_symbols[-1].args[1][0]  # (saved tensors, saved other), after the output
print("thunderfx saves for backward:", [f"{t.name} {list(t.shape)}" for t in saved], "(eager's checkpoint: x only)")
sys.exit(1 if len(saved) > 1 else 0)
