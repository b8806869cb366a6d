"""Repro: gradient-divergence (checkpoint-specific) of thunderfx against eager PyTorch (converter: fixed).

First observed: judged against thunderfx without checkpoints
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


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.layer0 = nn.Dropout(0.5)

    def checkpointed0(self, x):
        x = self.layer0(x)
        return x

    def forward(self, x):
        x = checkpoint(self.checkpointed0, x, use_reentrant=False)
        return x


class PlainNet(Net):
    """``Net`` without its checkpoints: the checkpointed functions are called directly."""

    def forward(self, x):
        x = self.checkpointed0(x)
        return x


SEED = 0
DTYPE = torch.float32
DEVICE = 'cpu'
INPUT_SHAPE = (2, 8)
OUTPUT_SHAPE = (2, 8)


def make_example(checkpointing=True):
    """The network (``PlainNet`` without checkpointing), its input and the backward cotangent, drawn from SEED."""
    torch.manual_seed(SEED)
    net = (Net if checkpointing else PlainNet)().to(device=DEVICE, dtype=DTYPE)
    generator = torch.Generator().manual_seed(SEED)
    x = torch.randn(INPUT_SHAPE, generator=generator).to(device=DEVICE, dtype=DTYPE).requires_grad_(True)
    cotangent = torch.randn(OUTPUT_SHAPE, generator=generator).to(device=DEVICE, dtype=DTYPE)
    return net, x, cotangent


CONVERTER = 'fixed'
RANDOM = True


"""The forward/backward run and the tensor comparison, shared by the harness and every repro.py.

This module's source is copied verbatim into each repro.py, so the harness's verdict and the
repro's exit code come from the same code. It must import nothing but torch.
"""

import copy

import torch

# Allowed error of thunderfx, as (rtol, atol, floor): an element fails when
# |thunder - ref| > rtol * |ref| + atol * max|ref over the tensor| + floor + slack,
# where ref is a float64 eager run of the same network (eager itself for float64 networks)
# and slack is a per-dtype factor times eager's own largest error against ref on that tensor.
# Thunder's CPU path decomposes ops (layer_norm, gelu, softplus, ...) into prims, which changes
# the order of float operations but not their number much: for these <= 8-layer, <= 64-wide
# networks the observed float32 differences are ~1e-6 relative, so rtol 1e-4 leaves 100x
# headroom while a 0.1% error in a gradient (a 1.001 scale) still fails. The atol term scales
# with the tensor because cancellation makes near-zero elements as noisy as the tensor's large
# ones; the floor (a few float32 ulps at 1.0) covers tensors whose eager values are all ~0.
# float64 gets the same rule with 1e-9 relative: ~10^7 ulps of headroom, far below any real bug.
# Where eager's own rounding error is large (a gradient that is a near-total cancellation, as
# through LayerNorm of a Linear of one feature), thunder's is of the same order: the last
# entry, the slack factor, allows that many times eager's error. bfloat16 and float16 get about
# one ulp (2^-7, 2^-10) relative and absolute: thunder upcasts some ops to float32 internally,
# so its error is of eager's order or smaller, never 4x larger unless something is wrong.
TOLERANCES = {
    torch.float32: (1e-4, 1e-5, 1e-6, 10.0),
    torch.float64: (1e-9, 1e-10, 1e-12, 10.0),
    torch.bfloat16: (8e-3, 8e-3, 1e-3, 4.0),
    torch.float16: (1e-3, 1e-3, 1e-4, 4.0),
}


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


def mismatch(actual, expected, reference=None):
    """None when ``actual`` matches within its dtype's tolerance, else a one-line description.

    ``expected`` is eager's tensor; ``reference``, when given, the float64 eager one, which
    ``actual`` is then judged against with eager's own error as extra slack.
    """
    if actual is None or expected is None:
        if actual is None and expected is None:
            return None
        return "no gradient under thunderfx, but eager has one" if actual is None else "gradient where eager has none"
    if actual.shape != expected.shape or actual.dtype != expected.dtype:
        return f"shape/dtype {tuple(actual.shape)}/{actual.dtype} != {tuple(expected.shape)}/{expected.dtype}"
    rtol, atol, floor, eager_factor = TOLERANCES[expected.dtype]
    got, want = actual.detach().double().cpu(), expected.detach().double().cpu()
    if not torch.isfinite(got).all():
        return f"{int((~torch.isfinite(got)).sum())}/{got.numel()} non-finite elements"
    slack = 0.0
    if reference is not None:
        reference = reference.detach().cpu()
        slack = eager_factor * (want - reference).abs().max().item() if want.numel() else 0.0
        want = reference
    scale = want.abs().max().item() if want.numel() else 0.0
    diff = (got - want).abs()
    bad = diff > rtol * want.abs() + atol * scale + floor + slack
    if not bad.any():
        return None
    worst = int(diff.argmax())
    return (
        f"max abs diff {diff.max().item():.4g} on {int(bad.sum())}/{got.numel()} elements "
        f"(at flat index {worst}: {got.flatten()[worst].item():.6g} vs {want.flatten()[worst].item():.6g}; "
        f"max |{'float64 ' if reference is not None else ''}eager| {scale:.4g}, eager error slack {slack:.3g})"
    )


def compare(thunder_result, eager_result, reference_result=None):
    """The mismatches of ``thunder_result`` against eager as ``(forward, gradients)`` lists of lines.

    With ``reference_result`` (a `float64_reference` run), each tensor is judged against it.
    """
    (thunder_out, thunder_grads), (eager_out, eager_grads) = thunder_result, eager_result
    ref_out, ref_grads = reference_result if reference_result is not None else (None, {})
    forward = [f"output: {m}"] if (m := mismatch(thunder_out, eager_out, ref_out)) else []
    gradients = [
        f"grad of {name}: {m}"
        for name in eager_grads
        if (m := mismatch(thunder_grads.get(name), eager_grads[name], ref_grads.get(name)))
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
    from thunder.dynamo import thunderfx

    if CONVERTER == "fixed":
        thunder.dynamo.utils._checkpoint_function_converter = meta_preserving_checkpoint_function_converter
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
