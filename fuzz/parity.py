"""The forward/backward run and the tensor comparison, shared by the harness and every repro.py.

This module's source is copied verbatim into each repro.py, so the harness's verdict and the
repro's exit code come from the same code. It must import nothing but torch.
"""

import torch

# Allowed error of thunderfx against eager, as (rtol, atol, floor): an element fails when
# |thunder - eager| > rtol * |eager| + atol * max|eager over the tensor| + floor.
# Thunder's CPU path decomposes ops (layer_norm, gelu, softplus, ...) into prims, which changes
# the order of float operations but not their number much: for these <= 8-layer, <= 64-wide
# networks the observed float32 differences are ~1e-6 relative, so rtol 1e-4 leaves 100x
# headroom while a 0.1% error in a gradient (a 1.001 scale) still fails. The atol term scales
# with the tensor because cancellation makes near-zero elements as noisy as the tensor's large
# ones; the floor (a few float32 ulps at 1.0) covers tensors whose eager values are all ~0.
# float64 gets the same rule with 1e-9 relative: ~10^7 ulps of headroom, far below any real bug.
TOLERANCES = {
    torch.float32: (1e-4, 1e-5, 1e-6),
    torch.float64: (1e-9, 1e-10, 1e-12),
}


def forward_backward(fn, net, x, cotangent):
    """Run ``fn(x)`` and backward with ``cotangent``; return the output and the gradient of the input and each parameter.

    ``fn`` is ``net`` itself (eager) or a compiled wrapper of it. Gradients are keyed
    ``"input"`` and by parameter name; a parameter that received no gradient maps to None.
    """
    output = fn(x)
    output.backward(cotangent)
    grads = {"input": x.grad}
    grads.update((name, p.grad) for name, p in net.named_parameters())
    return output.detach(), grads


def mismatch(actual, expected):
    """None when ``actual`` matches ``expected`` within its dtype's tolerance, else a one-line description."""
    if actual is None or expected is None:
        return None if actual is None and expected is None else f"gradient present in only one run ({actual=}, {expected=})"
    if actual.shape != expected.shape or actual.dtype != expected.dtype:
        return f"shape/dtype {tuple(actual.shape)}/{actual.dtype} != {tuple(expected.shape)}/{expected.dtype}"
    rtol, atol, floor = TOLERANCES[expected.dtype]
    got, want = actual.detach().double().cpu(), expected.detach().double().cpu()
    if not torch.isfinite(got).all():
        return f"{int((~torch.isfinite(got)).sum())}/{got.numel()} non-finite elements"
    scale = want.abs().max().item() if want.numel() else 0.0
    diff = (got - want).abs()
    bad = diff > rtol * want.abs() + atol * scale + floor
    if not bad.any():
        return None
    worst = int(diff.argmax())
    return (
        f"max abs diff {diff.max().item():.4g} on {int(bad.sum())}/{got.numel()} elements "
        f"(at flat index {worst}: {got.flatten()[worst].item():.6g} vs {want.flatten()[worst].item():.6g}; "
        f"max |eager| {scale:.4g})"
    )


def compare(thunder_result, eager_result):
    """The mismatches of ``thunder_result`` against ``eager_result`` as ``(forward, gradients)`` lists of lines."""
    (thunder_out, thunder_grads), (eager_out, eager_grads) = thunder_result, eager_result
    forward = [f"output: {m}"] if (m := mismatch(thunder_out, eager_out)) else []
    gradients = [
        f"grad of {name}: {m}"
        for name in eager_grads
        if (m := mismatch(thunder_grads.get(name), eager_grads[name]))
    ]
    return forward, gradients
