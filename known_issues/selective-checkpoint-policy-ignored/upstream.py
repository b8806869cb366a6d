"""selective checkpoint policy ignored, reduced by hand. Exit 1: the recorded failure shows; 0: it does not; 2: anything else."""
import functools, os, sys
sys.excepthook = lambda *e: (sys.__excepthook__(*e), os._exit(2))  # exit 2: anything unexpected
import torch
from torch.utils.checkpoint import CheckpointPolicy, checkpoint, create_selective_checkpoint_contexts
from thunder.dynamo import thunderfx

calls = []


def save_matmuls(ctx, op, *args, **kwargs):  # keep matmul results for backward, recompute the rest
    calls.append(op)
    return CheckpointPolicy.MUST_SAVE if op == torch.ops.aten.mm.default else CheckpointPolicy.PREFER_RECOMPUTE


net = torch.nn.Sequential(torch.nn.Linear(32, 64, bias=False), torch.nn.Tanh(), torch.nn.Linear(64, 32, bias=False))
context_fn = functools.partial(create_selective_checkpoint_contexts, save_matmuls)


def f(x):
    return checkpoint(net, x, use_reentrant=False, context_fn=context_fn).relu()


def policy_calls(fn):
    calls.clear()
    fn(torch.randn(16, 32, requires_grad=True)).sum().backward()
    return len(calls)


eager, thunder = policy_calls(f), policy_calls(thunderfx(f))
print(f"the policy was asked about {eager} ops in eager, {thunder} under thunderfx")
# Recorded on thunder 0.2.6 and 0.2.7.dev20260201: eager 9, thunderfx 0; thunder recomputes the first matmul in backward (its trace), keeps
# 512 B where eager's policy keeps both matmul results (6,144 B), and no warning says the policy was dropped.
sys.exit(1 if eager and not thunder else 0)
