"""Repro: gradient-divergence (thunder-general) of thunderfx against eager PyTorch (converter: fixed).

First observed: grad of input: 3/8 non-finite elements
Exits 1 when the divergence reproduces, 0 when it does not. Needs only torch and lightning-thunder.
"""

import sys

import functools

import torch
import torch.nn.functional as F
from torch import nn
from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import (
    CheckpointImpl,
    apply_activation_checkpointing,
    checkpoint_wrapper,
)
from torch.utils.checkpoint import (
    CheckpointPolicy,
    checkpoint,
    checkpoint_sequential,
    create_selective_checkpoint_contexts,
)


def adapt(x, shape, low, high, offset=0):
    """``x``'s values from flat position ``offset`` on (zeros past its end), shaped ``shape``, mapped into
    ``(low, high)``. Padding rather than tiling: a tiled input would sum many low-precision gradients."""
    flat = x.reshape(-1)
    count = 1
    for size in shape:
        count *= size
    flat = F.pad(flat, (0, max(0, count + offset - flat.numel())))[offset : offset + count]
    # In float32 (float64 for a float64 input), rounded once: in bfloat16 `low + (high - low) * s`
    # cancels, and eager and thunder round its steps differently. tanh, not sigmoid: thunder's
    # sigmoid gradient is NaN for inputs below about -90 (known issue sigmoid-grad-nan-large-negative).
    wide = flat.reshape(shape).to(torch.promote_types(x.dtype, torch.float32))
    return (low + (high - low) * (torch.tanh(wide) + 1) / 2).to(x.dtype)


def spread(x, shape, low, high):
    """A constant tensor of ``shape`` (no gradient) with values evenly spread over ``[low, high]``, like ``x``.

    Not ``adapt(...).detach()``: thunderfx sends any region holding a detach to its fallback."""
    count = 1
    for size in shape:
        count *= size
    steps = torch.arange(count, device=x.device, dtype=torch.promote_types(x.dtype, torch.float32))
    return (low + (high - low) * steps / max(count - 1, 1)).reshape(shape).to(x.dtype)


def fold(y, like):
    """Every floating tensor of ``y`` (a tensor or a sequence of them), flattened, cut or zero-padded to
    ``like``'s shape."""
    parts = [t.reshape(-1) for t in (y if isinstance(y, (tuple, list)) else (y,)) if t.is_floating_point()]
    flat = torch.cat(parts).to(like.dtype)
    count = like.numel()
    return F.pad(flat, (0, max(0, count - flat.numel())))[:count].reshape(like.shape)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.layer1 = nn.Sigmoid()

    def forward(self, x):
        x = fold(torch.sinh(adapt(x, (11,), -7.1632, 7.871, 0)), x)
        x = self.layer1(x)
        return x


class PlainNet(Net):
    """``Net`` without its checkpoints: the checkpointed functions are called directly."""

    def forward(self, x):
        x = fold(torch.sinh(adapt(x, (11,), -7.1632, 7.871, 0)), x)
        x = self.layer1(x)
        return x


SEED = 0
DTYPE = torch.float32
DEVICE = 'cpu'
INPUT_SHAPE = (2, 4)
OUTPUT_SHAPE = (2, 4)


def make_example(checkpointing=True):
    """The network (``PlainNet`` without checkpointing), its input and the backward cotangent, drawn from SEED."""
    torch.manual_seed(SEED)
    net = (Net if checkpointing else PlainNet)().to(device=DEVICE, dtype=DTYPE)
    generator = torch.Generator().manual_seed(SEED)
    x = torch.randn(INPUT_SHAPE, generator=generator).to(device=DEVICE, dtype=DTYPE).requires_grad_(True)
    cotangent = torch.randn(OUTPUT_SHAPE, generator=generator).to(device=DEVICE, dtype=DTYPE)
    return net, x, cotangent


CONVERTER = 'fixed'
EXECUTORS = []
RANDOM = False


"""The forward/backward run and the tensor comparison, shared by the harness and every repro.py.

This module's source is copied verbatim into each repro.py, so the harness's verdict and the
repro's exit code come from the same code. It must import nothing but torch.
"""

import copy

import torch

# How far thunderfx may be from the truth, per dtype (docs/oracle.md has the measurements):
# (rtol, atol, floor, eager_factor, example_ulps, drift). "ref" is a float64 eager run of the
# same weights (eager itself for float64 networks); eager's own error against it is the
# measure of how noisy a tensor is in this dtype.
# 1. Elementwise: |thunder - ref| <= rtol |ref| + atol max|ref| + floor + example_ulps eps S
#    + eager_factor max|eager - ref|, with S the example's scale (the largest |ref| over the output
#    and all gradients): the eps S term covers tensors that are a near-total cancellation (an
#    attention key bias's gradient is exactly 0, computed as a sum of terms of order S).
#    rtol is ~1000 ulps for float32 (thunder reorders float ops: observed differences ~1 ulp),
#    ~1 ulp for bfloat16/float16, 1e-9 for float64.
# 2. In bfloat16/float16 only, a few elements (<= 1%, at least one) may break bound 1 by at most
#    the tensor's own scale: a one-ulp rounding difference flips a threshold (x > 0.5, relu at 0,
#    a max between near-ties) and moves an element by the size of the jump. Measured: eager
#    exact, thunder off by 10% of the tensor's scale on one element of a bfloat16 input gradient.
# 3. Systematic scale: alpha = <x, ref> / <ref, ref> (a gradient off by a constant factor has
#    alpha = that factor), over the elements that are not flips. |alpha_thunder - 1| <= drift +
#    eager_factor (|alpha_eager - 1| + 3 noise / sqrt(n)), noise being eager's relative error norm
#    and n the number of elements, on tensors above the example's noise level (max|ref| >=
#    sqrt(eps) S). This catches a 1% error in a bfloat16 gradient of some dozens of elements,
#    which is inside rounding noise elementwise.
TOLERANCES = {
    torch.float32: (1e-4, 1e-5, 1e-6, 10.0, 1.0, 1e-4),
    torch.float64: (1e-9, 1e-10, 1e-12, 10.0, 1.0, 1e-9),
    torch.bfloat16: (8e-3, 8e-3, 1e-3, 4.0, 1.0, 4e-3),
    torch.float16: (1e-3, 1e-3, 1e-4, 4.0, 1.0, 1e-3),
}
# Share of a low-precision tensor's elements allowed to flip at a threshold (rule 2).
FLIP_SHARE = {torch.bfloat16: 0.01, torch.float16: 0.01}


def fresh_input(x):
    """A new leaf copy of ``x`` that requires grad exactly when ``x`` does."""
    return x.detach().clone().requires_grad_(x.requires_grad)


def forward_backward(fn, net, x, cotangent):
    """Run ``fn(x)``, then backward with ``cotangent``; return the output and the input's and parameters' gradients.

    ``fn`` is ``net`` itself (eager) or a compiled wrapper of it. Gradients are keyed
    ``"input"`` and by parameter name (checkpoint_wrapper's prefix removed, so a network and
    its ``PlainNet`` share names); a parameter that received no gradient maps to None.
    The global RNG is seeded first, so every run of a network draws the same random numbers.
    """
    torch.manual_seed(0)
    output = fn(x)
    output.backward(cotangent)
    grads = {"input": x.grad}
    grads.update((name.replace("_checkpoint_wrapped_module.", ""), p.grad) for name, p in net.named_parameters())
    return output.detach(), grads


def float64_reference(net, x, cotangent):
    """``forward_backward`` of a float64 copy of ``net`` on float64 copies of ``x`` and ``cotangent``."""
    net = copy.deepcopy(net).double()
    x = fresh_input(x.double()) if x.is_floating_point() else x
    return forward_backward(net, net, x, cotangent.double())


def _scale_factor(x, ref):
    """The least-squares factor alpha with x ~ alpha * ref (None for an all-zero ref)."""
    norm2 = (ref * ref).sum().item()
    return (x * ref).sum().item() / norm2 if norm2 > 0 else None


def mismatch(actual, expected, reference=None, example_scale=0.0):
    """None when ``actual`` matches within its dtype's tolerance (see `TOLERANCES`), else a one-line description.

    ``expected`` is eager's tensor; ``reference``, when given, the float64 eager one, which
    ``actual`` is then judged against with eager's own error as the measure of noise.
    ``example_scale`` is the largest |reference| over the example's output and gradients.
    """
    if actual is None or expected is None:
        if actual is None and expected is None:
            return None
        return "no gradient under thunderfx, but eager has one" if actual is None else "gradient where eager has none"
    if actual.shape != expected.shape or actual.dtype != expected.dtype:
        return f"shape/dtype {tuple(actual.shape)}/{actual.dtype} != {tuple(expected.shape)}/{expected.dtype}"
    if not actual.numel():
        return None
    rtol, atol, floor, eager_factor, example_ulps, drift = TOLERANCES[expected.dtype]
    eps = torch.finfo(expected.dtype).eps
    got, want = actual.detach().double().cpu(), expected.detach().double().cpu()
    if not torch.isfinite(got).all():
        return f"{int((~torch.isfinite(got)).sum())}/{got.numel()} non-finite elements"
    eager, eager_error = want, 0.0
    if reference is not None:
        want = reference.detach().cpu()
        eager_error = (eager - want).abs().max().item()
    scale = want.abs().max().item()
    diff = (got - want).abs()
    slack = example_ulps * eps * example_scale + eager_factor * eager_error
    bad = diff > rtol * want.abs() + atol * scale + floor + slack
    flips = int(bad.sum()) <= max(1, FLIP_SHARE.get(expected.dtype, 0.0) * got.numel()) and bool(
        (diff[bad] <= scale).all()
    )
    if bad.any() and not (expected.dtype in FLIP_SHARE and flips):
        worst = int(diff.argmax())
        return (
            f"max abs diff {diff.max().item():.4g} on {int(bad.sum())}/{got.numel()} elements "
            f"(at flat index {worst}: {got.flatten()[worst].item():.6g} vs {want.flatten()[worst].item():.6g}; "
            f"max |{'float64 ' if reference is not None else ''}eager| {scale:.4g}, slack {slack:.3g})"
        )
    # Rule 3 on the elements that are not flips (a flip moves one element by up to the scale).
    kept = ~bad
    got, want, eager = got[kept], want[kept], eager[kept]
    alpha, eager_alpha = _scale_factor(got, want), _scale_factor(eager, want)
    if alpha is None or scale < eps**0.5 * example_scale:
        return None
    eager_drift = abs(eager_alpha - 1) if reference is not None else 0.0
    eager_noise = (eager - want).norm().item() / want.norm().item() if reference is not None else 0.0
    # Independent rounding errors of relative size e move alpha by about e / sqrt(n): 3 sigma of
    # that, times the eager factor for thunder's noise being a few times eager's.
    if abs(alpha - 1) > drift + eager_factor * (eager_drift + 3 * eager_noise / got.numel() ** 0.5):
        return (
            f"systematic scale error: thunderfx ~ {alpha:.6g} x {'float64 ' if reference is not None else ''}eager "
            f"(least squares over {got.numel()} elements; eager's own factor {1 + eager_drift:.6g}, "
            f"relative noise {eager_noise:.3g})"
        )
    return None


def compare(thunder_result, eager_result, reference_result=None):
    """The mismatches of ``thunder_result`` against eager as ``(forward, gradients)`` lists of lines.

    With ``reference_result`` (a `float64_reference` run), each tensor is judged against it.
    """
    (thunder_out, thunder_grads), (eager_out, eager_grads) = thunder_result, eager_result
    ref_out, ref_grads = reference_result if reference_result is not None else (None, {})
    truth = [t for t in (ref_out, *ref_grads.values()) if t is not None] or [eager_out, *eager_grads.values()]
    example_scale = max((t.detach().abs().max().item() for t in truth if t is not None and t.numel()), default=0.0)
    forward = [f"output: {m}"] if (m := mismatch(thunder_out, eager_out, ref_out, example_scale)) else []
    gradients = [
        f"grad of {name}: {m}"
        for name in eager_grads
        if (m := mismatch(thunder_grads.get(name), eager_grads[name], ref_grads.get(name), example_scale))
    ]
    return forward, gradients



def meta_preserving_checkpoint_function_converter(gm: torch.fx.GraphModule) -> None:
    """Replace the torch ops of a checkpointed body ``gm`` by thunder ops, in place, keeping each node's ``meta``.

    Identical to thunder 0.2.6's `_checkpoint_function_converter` except for the copied
    ``meta`` (example_value, requires_grad, tensor_meta, ...), which the stock version drops.
    """
    from thunder.dynamo.utils import _torch_to_thunder_function_map, recompile_graph

    for n in gm.graph.nodes:
        if n.op == "call_module":
            raise RuntimeError(
                "Unexpected call_module detected inside a checkpoint. This should have been inlined in dynamo graphs"
            )
        if n.op != "call_function" or n.target.__module__ in ("_operator", "builtins"):
            continue
        if n.target not in _torch_to_thunder_function_map:
            raise RuntimeError(f"Unexpected {n.target}, not registered in Thunder")
        with gm.graph.inserting_before(n):
            thunder_node = gm.graph.call_function(
                _torch_to_thunder_function_map[n.target], args=n.args, kwargs=n.kwargs
            )
        thunder_node.meta = n.meta.copy()
        n.replace_all_uses_with(thunder_node)
        gm.graph.erase_node(n)
    gm.graph.lint()
    recompile_graph(gm)


def main():
    import copy
    import traceback

    import thunder.dynamo.utils
    import thunder.extend
    from thunder.dynamo import thunderfx

    if CONVERTER == "fixed":
        thunder.dynamo.utils._checkpoint_function_converter = meta_preserving_checkpoint_function_converter
    if EXECUTORS:  # else thunder's default executors
        thunder.extend.set_default_executors([thunder.extend.get_executor(name) for name in EXECUTORS])
    net, x, cotangent = make_example()
    if RANDOM:
        # Eager and thunder draw different random streams: the expected result is thunderfx's
        # own run of the same network without checkpoints, under the same seed.
        plain, _, _ = make_example(checkpointing=False)
        expected, reference = forward_backward(thunderfx(plain), plain, fresh_input(x), cotangent), None
    else:
        eager_net = copy.deepcopy(net)
        expected = forward_backward(eager_net, eager_net, fresh_input(x), cotangent)
        reference = float64_reference(net, x, cotangent) if DTYPE != torch.float64 else None
    thunder_net = copy.deepcopy(net)
    try:
        result = forward_backward(thunderfx(thunder_net), thunder_net, fresh_input(x), cotangent)
    except Exception:
        traceback.print_exc()
        print("REPRODUCED: thunderfx raised where eager ran")
        return 1
    forward, gradients = compare(result, expected, reference)
    for line in forward + gradients:
        print(line)
    if forward or gradients:
        print(f"REPRODUCED: {len(forward)} forward and {len(gradients)} gradient mismatches")
        return 1
    print(f"NOT REPRODUCED: thunderfx matches {'itself without checkpoints' if RANDOM else 'eager'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
