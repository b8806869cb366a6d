"""The passes of an example: its forward and backward (outputs, gradients and mutated state), the float64
reference, the nudged copies of the oracle's probe and the copy one precision up.

Shared by the harness and every repro.py: this module's source is copied verbatim into each repro (before
`fuzz.judge.parity`'s), so the harness's verdict and the repro's exit code come from the same code. It must import
nothing but torch.
"""

import copy

import torch

# The probe of rule 2: eager on this many copies of the example, each value moved by up to this many ulps.
NUDGES = 8
NUDGE_ULPS = 2.0
# What a run may mutate in place (its input, the network's buffers) is recorded beside the gradients under
# these suffixes (`mutable_state`). After backward it is judged against the state after forward: without
# checkpoints a backward mutates nothing, while eager's checkpoint recomputation re-runs in-place updates
# (BatchNorm's running statistics are updated twice, a documented PyTorch caveat) where thunder's does not.
AFTER_FORWARD = " after forward"


AFTER_BACKWARD = " after backward"
# The copy of an example one precision up (the same values in a wider dtype): see `fuzz.judge.parity.failure_class`.
ONE_PRECISION_UP = {torch.bfloat16: torch.float32, torch.float16: torch.float32, torch.float32: torch.float64}
_WRAPPED = "_checkpoint_wrapped_module."


def is_state(name):
    """Whether a result entry is a mutated tensor's state rather than a gradient."""
    return name.endswith((AFTER_FORWARD, AFTER_BACKWARD))


def mutable_state(net, x, suffix):
    """Copies of what a run may mutate, keyed "<name><suffix>": a float input and every buffer (as float64
    when it is an integer count)."""
    tensors = {"input": x} if x.is_floating_point() else {}
    tensors.update((f"buffer {name.replace(_WRAPPED, '')}", buffer) for name, buffer in net.named_buffers())
    return {
        name + suffix: t.detach().clone() if t.is_floating_point() else t.detach().double()
        for name, t in tensors.items()
    }


def fresh_input(x):
    """A new leaf copy of ``x`` that requires grad exactly when ``x`` does."""
    return x.detach().clone().requires_grad_(x.requires_grad)


def forward_backward(fn, net, x, cotangent):
    """Run ``fn(x)``, then backward with ``cotangent``; return the output and the input's and parameters' gradients.

    ``fn`` is ``net`` itself (eager) or a compiled wrapper of it. Gradients are keyed
    ``"input"`` and by parameter name (checkpoint_wrapper's prefix removed, so a network and
    its ``PlainNet`` share names); a parameter that received no gradient maps to None. The
    `mutable_state` after forward and after backward is in the same mapping.
    The global RNG is seeded first, so every run of a network draws the same random numbers.
    """
    torch.manual_seed(0)
    output = fn(x)
    after_forward = mutable_state(net, x, AFTER_FORWARD)
    output.backward(cotangent)
    grads = {"input": x.grad}
    grads.update((name.replace(_WRAPPED, ""), p.grad) for name, p in net.named_parameters())
    return output.detach(), {**grads, **after_forward, **mutable_state(net, x, AFTER_BACKWARD)}


def float64_reference(net, x, cotangent):
    """``forward_backward`` of a float64 copy of ``net`` on float64 copies of ``x`` and ``cotangent``."""
    net = copy.deepcopy(net).double()
    x = fresh_input(x.double()) if x.is_floating_point() else x
    return forward_backward(net, net, x, cotangent.double())


def nudged_runs(net, x, cotangent, runs=NUDGES):
    """Eager on ``runs`` copies of ``net`` and ``x`` whose floating-point values are moved by up to `NUDGE_ULPS`
    ulps at random: where an element jumps, eager sits at a discontinuity. Each run is a pair of a sample of eager
    and its truth, so that eager's own error and drift can be seen over several samples, not one (rules 1 and 3):
    the copy's `forward_backward` and its `float64_reference`; for a float64 network, which has no wider truth,
    the copy's float64 run as the truth and, as the sample, that run moved by its float32 twin's error scaled down by
    the ratio of the epsilons (rounding errors scale with eps); the truth is None where no float32 twin runs."""
    generator = torch.Generator().manual_seed(0)

    def nudge(t):
        if not t.is_floating_point():
            return t
        noise = torch.rand(t.shape, generator=generator, dtype=torch.float64) * 2 - 1
        return t * (1 + NUDGE_ULPS * torch.finfo(t.dtype).eps * noise).to(t.dtype).to(t.device)

    results = []
    for _ in range(runs):
        nudged = copy.deepcopy(net)
        with torch.no_grad():
            for parameter in nudged.parameters():
                parameter.copy_(nudge(parameter))
        nudged_x = fresh_input(nudge(x.detach())).requires_grad_(x.requires_grad)
        # The truth first, from copies: the run mutates its input and buffers (in-place layers, BatchNorm).
        if cotangent.dtype != torch.float64:
            truth = float64_reference(nudged, nudged_x, cotangent)
            results.append((forward_backward(nudged, nudged, nudged_x, cotangent), truth))
        else:
            twin = _float32_twin(nudged, nudged_x, cotangent)
            results.append(_float64_rounding_sample(forward_backward(nudged, nudged, nudged_x, cotangent), twin))
    return results


def _float32_twin(net, x, cotangent):
    """`forward_backward` of float32 copies of a float64 example; None where the network pins a dtype or the twin
    is not finite (no evidence of float64's rounding then)."""
    net = copy.deepcopy(net).float()
    try:
        twin = forward_backward(net, net, fresh_input(x.float()) if x.is_floating_point() else x, cotangent.float())
    except Exception:  # the network pins a dtype (an op's literal argument)
        return None
    return twin if finite(twin) else None


def finite(result):
    """Whether a `forward_backward` result's output and every tensor beside it are finite."""
    output, grads = result
    return all(bool(torch.isfinite(t).all()) for t in (output, *grads.values()) if t is not None)


def _float64_rounding_sample(run, twin):
    """(``run`` moved by its float32 ``twin``'s error x eps64/eps32, ``run``), or (``run``, None) without a twin."""
    if twin is None:
        return run, None
    ratio = torch.finfo(torch.float64).eps / torch.finfo(torch.float32).eps

    def moved(t, t32):
        if t is None or t32 is None or t32.shape != t.shape or not t.is_floating_point():
            return t
        return t + (t32.detach().double().to(t.device) - t) * ratio

    (out, grads), (out32, grads32) = run, twin
    return (moved(out, out32), {name: moved(t, grads32.get(name)) for name, t in grads.items()}), run


def one_precision_up(net, x, cotangent):
    """Copies of an example in the next wider dtype (`ONE_PRECISION_UP`), holding exactly the same values."""
    dtype = ONE_PRECISION_UP[cotangent.dtype]
    net = copy.deepcopy(net).to(dtype)
    x = fresh_input(x.to(dtype)) if x.is_floating_point() else x
    return net, x, cotangent.to(dtype)
