"""mish bfloat16 grad inaccurate. Exit 1: the recorded failure shows; 0: it does not; 2: anything else."""
import copy, math, os, sys
sys.excepthook = lambda *e: (sys.__excepthook__(*e), os._exit(2))  # exit 2: anything unexpected
import functools
import torch
from torch.utils.checkpoint import CheckpointPolicy, checkpoint, create_selective_checkpoint_contexts
from thunder.dynamo import thunderfx
def adapt(x, shape, low):
    count = math.prod(shape)
    flat = torch.nn.functional.pad(x.reshape(-1), (0, max(0, count + 0 - x.numel())))[0:0 + count]
    wide = flat.reshape(shape).to(torch.promote_types(x.dtype, torch.float32))
    return (low + (8.0964 - low) * (torch.tanh(wide) + 1) / 2).to(x.dtype)
def fold(y, like):
    flat = torch.cat([t.reshape(-1) for t in (y if isinstance(y, (tuple, list)) else (y,)) if t.is_floating_point()])
    return torch.nn.functional.pad(flat.to(like.dtype), (0, max(0, like.numel() - flat.numel())))[:like.numel()].reshape(like.shape)
def save_matmuls(ctx, op, *args, **kwargs):
    if op in (torch.ops.aten.mm.default, torch.ops.aten.addmm.default, torch.ops.aten.bmm.default):
        return CheckpointPolicy.MUST_SAVE
    return CheckpointPolicy.PREFER_RECOMPUTE
class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Embedding(43, 57)
        self.layer1 = torch.nn.ELU()
        self.layer2 = torch.nn.Mish()
        self.layer3 = torch.nn.Mish()
    def checkpointed0(self, x, scale, *, shift):
        x = x * scale + shift
        return fold(self.layer2(adapt(x, (11,), -5.9713)), x)
    def forward(self, x):
        x = self.embed(x)
        x = fold(torch.nn.functional.mish(adapt(x, (11,), -5.9713)), x)
        x = self.layer1(x)
        x = checkpoint(self.checkpointed0, x, 0.5, shift=x.mean(dim=-1, keepdim=True), use_reentrant=False, determinism_check='none', context_fn=functools.partial(create_selective_checkpoint_contexts, save_matmuls))
        return fold(self.layer3(adapt(x, (11,), -5.9713)), x)
torch.manual_seed(374)
net = Net().to(device='cpu', dtype=torch.bfloat16)
generator = torch.Generator().manual_seed(374)
x = torch.randint(43, (2,), generator=generator).to('cpu')
cotangent = torch.randn((2, 57), generator=generator).to(device='cpu', dtype=torch.bfloat16)
def run(model, fn):
    x_ = x.detach().requires_grad_(x.requires_grad)
    (out := fn(x_)).backward(cotangent)
    return [out, x_.grad, *(p.grad for p in model.parameters())]
eager, double = copy.deepcopy(net), copy.deepcopy(net).double()
expected = run(eager, eager)
actual = run(net, thunderfx(net))
x, cotangent = x.double() if x.is_floating_point() else x, cotangent.double()
reference = run(double, double)
def error(result):  # the largest difference from the float64 reference
    return max((a.double() - r).abs().max().item() for a, r in zip(result, reference) if r is not None)
print(f"error against float64: thunderfx {error(actual):.3g}, eager {error(expected):.3g}")
sys.exit(1 if error(actual) > 2 * error(expected) else 0)  # recorded on thunder 0.2.6: thunderfx's error against float64 is 4.16x eager's in bfloat16, while it is right one precision up
