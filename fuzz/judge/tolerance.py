"""The tolerance rules: each tensor of thunderfx's run against eager's and the float64 truth, and the failure class.

Shared by `fuzz.judge.verdict` and every repro.py: this module's source is copied verbatim into each repro, after
`fuzz.run.passes`'s and without its import of it, so the harness's verdict and the repro's exit code come from the
same code. It must import nothing but torch and `fuzz.run.passes`.
"""

import copy
import math
import re

import torch

from fuzz.run.passes import (
    AFTER_BACKWARD,
    AFTER_FORWARD,
    AT_STEP,
    forward_backward,
    fresh_input,
    is_output,
    is_state,
    nudged_runs,
    one_precision_up,
)

# How far thunderfx may be from the truth, per dtype (docs/oracle.md has the measurements):
# (rtol, atol, eager_factor, example_ulps, drift). "ref" is a float64 eager run of the same weights (eager itself
# for float64 networks); eager's own error against it is the measure of how noisy a tensor is in this dtype.
# 1. Elementwise: |thunder - ref| <= rtol |ref| + atol max|ref| + tiny + k noise [+ example_ulps eps S], all of the
#    tensor's own but the last: noise is eager's error on this tensor (the largest of its error on the example and the
#    median over the nudged copies of rule 2, each against its own truth; for a float64 network, the larger of a float32
#    copy's error scaled by the ratio of the epsilons and eager's own spread over the nudged copies), tiny the dtype's
#    smallest normal number (the floor is relative: atol max|ref|). The example's scale S (the largest |ref| over the
#    output and all gradients) enters only where the tensor is shown to be a cancellation (`cancelled`): its truth is
#    all zero, or eager's own error on it is at least `CANCELLATION_EPS` eps of its scale. Measured: an attention key
#    bias's gradient is exactly 0, computed as a sum of terms of order S (float16: eager 3e-5, thunder 2.7e-4); a
#    float64 input gradient of scale 1.9e-7 in an example of scale 8.4, off by one ulp of S (its float32 copy is 5x its
#    scale off). A clean tensor is judged by its own scale: a 20% error on a bfloat16 gradient of scale 3 fails beside a
#    tensor of scale 100. rtol is ~1000 ulps for float32 (thunder reorders float ops: observed differences ~1 ulp), ~1
#    ulp for bfloat16/float16, 1e-9 for float64.
# 2. In bfloat16/float16 only, a few elements (<= 1%, at least one) may break bound 1 by at most
#    the tensor's own scale, and only where eager itself sits at a discontinuity: a one-ulp rounding
#    difference flips a threshold (x > 0.5, relu at 0, a max between near-ties) and moves an element
#    by the size of the jump. Measured: eager exact, thunder off by 10% of the tensor's scale on one
#    element of a bfloat16 input gradient. The discontinuity is probed by eager runs on inputs and
#    weights nudged by up to `NUDGE_ULPS` ulps (`nudged_runs`): an element is a flip when some nudged
#    run moves it by at least `FLIP_SENSITIVITY` of thunder's deviation there.
# 3. Systematic scale: alpha = <x, ref> / <ref, ref> (a gradient off by a constant factor has
#    alpha = that factor), over the elements that are not flips. |alpha_thunder - 1| <= drift +
#    max(eager_factor |alpha_eager - 1|, nudged drift) + eager_factor 3 noise / sqrt(n), noise being
#    eager's relative error norm, n the number of elements, and the nudged drift the largest
#    |alpha - 1| of eager on the nudged copies against their own truths (when probed), on
#    tensors above the example's noise level (max|ref| >= sqrt(eps) S) and on any smaller tensor shown clean:
#    against a float64 reference, eager computes it to within `CLEAN_NOISE` relative error (a gradient of scale
#    0.002 in an example of scale 1, doubled); in a float64 network, the probe shows it is no cancellation.
#    This catches a 1% error in a bfloat16 gradient of some dozens of elements, which is inside
#    rounding noise elementwise.
TOLERANCES = {
    torch.float32: (1e-4, 1e-5, 10.0, 1.0, 1e-4),
    torch.float64: (1e-9, 1e-10, 10.0, 1.0, 1e-9),
    torch.bfloat16: (8e-3, 8e-3, 4.0, 1.0, 4e-3),
    torch.float16: (1e-3, 1e-3, 4.0, 1.0, 1e-3),
}
# A tensor is a cancellation when eager's own error on it reaches this many ulps of its scale: its value is what is
# left of terms some orders larger (a clean tensor's error is a few ulps).
CANCELLATION_EPS = 64.0
# Share of a low-precision tensor's elements allowed to flip at a threshold (rule 2).
FLIP_SHARE = {torch.bfloat16: 0.01, torch.float16: 0.01}
FLIP_SENSITIVITY = 0.25
CLEAN_NOISE = 0.1
# Where a mismatch is only a matter of precision, thunderfx is right on the same network one precision up (same
# values, wider dtype, `one_precision_up`): then it is an accuracy gap, not a wrong result (`failure_class`) ... and
# only while each tensor's error is bounded (a bug in a bfloat16-only kernel is no rounding problem): its relative
# error max|thunder - ref| / max|ref| within ACCURACY_RATIO x eager's (eager's taken as at least eps / 8: eager can
# round exactly by luck) and within ACCURACY_EPS eps, and its systematic scale error |alpha - 1| within
# ACCURACY_DRIFT_EPS eps. Measured on the registered gaps of thunder 0.2.6 (CPU, bfloat16, their specs on 6 seeds,
# docs/oracle.md): gelu's output 0.063-0.136 (17-40x eager's, drift <= 0.035), attention's input and key gradients
# 0.076 and 0.37 (drift 0.083), mish's embedding gradient drift 0.024; softmax's one element 30% off (drift 0.14) and
# attention's 2.9 (drift 0.85) on other seeds are wrong results now, registered as divergences with their bands.
ACCURACY_RATIO, ACCURACY_EPS, ACCURACY_DRIFT_EPS = 64.0, 20.0, 12.0


class Mismatch(str):
    """A one-line description of a tensor that does not match, carrying the sizes of the errors.

    ``error``: max|actual - truth| / max|truth| (inf for a missing, misshapen or non-finite tensor);
    ``eager_error``: eager's, against the same float64 truth (None without one); ``drift``: the systematic scale
    error |alpha - 1| of actual against truth over all elements (inf where it has no meaning, as for ``error``);
    ``eps``: the tensor's dtype's machine epsilon; ``state``: the tensor is one the network mutates
    (`mutable_state`), not the output or a gradient; ``name``: the tensor's, once `named`; ``cancelled``: for a
    tensor shown to be a cancellation, (error, eager_error) against the example's scale, where the terms that cancel
    live (its own scale is what is left of them).
    """

    error: float
    eager_error: float | None
    drift: float
    eps: float
    state: bool
    name: str
    cancelled: tuple[float, float] | None

    def __new__(
        cls, text, error=math.inf, eager_error=None, drift=math.inf, eps=0.0, state=False, name="", cancelled=None
    ):
        mismatch = super().__new__(cls, text)
        mismatch.error, mismatch.eager_error, mismatch.drift, mismatch.eps = error, eager_error, drift, eps
        mismatch.state, mismatch.name, mismatch.cancelled = state, name, cancelled
        return mismatch

    def named(self, name, state=False):
        """The same mismatch, its description headed by the tensor's name; ``state``: a mutated tensor's."""
        named = (self.error, self.eager_error, self.drift, self.eps, state, name, self.cancelled)
        return Mismatch(f"{name}: {self}", *named)

    @property
    def bounded(self):
        """Whether it is small enough to be a matter of precision (see `ACCURACY_RATIO`), measured against float64: a
        cancellation against the example's scale, without a drift (its direction is rounding's)."""
        if self.eager_error is None:
            return False
        error, eager_error = self.cancelled or (self.error, self.eager_error)
        within_eager = error <= ACCURACY_RATIO * max(eager_error, self.eps / 8)
        drift = 0.0 if self.cancelled else self.drift
        return within_eager and error <= ACCURACY_EPS * self.eps and drift <= ACCURACY_DRIFT_EPS * self.eps


def _scale_factor(x, ref):
    """The least-squares factor alpha with x ~ alpha * ref (None for an all-zero ref)."""
    norm2 = (ref * ref).sum().item()
    return (x * ref).sum().item() / norm2 if norm2 > 0 else None


def mismatch(actual, expected, reference=None, example_scale=0.0, sensitivity=None, nudged=(), precision=None):
    """None when ``actual`` matches within its dtype's tolerance (see `TOLERANCES`), else a `Mismatch`.

    ``expected`` is eager's tensor; ``reference``, when given, the float64 eager one, which
    ``actual`` is then judged against with eager's own error as the measure of noise.
    ``example_scale`` is the largest |reference| over the example's output and gradients.
    ``sensitivity``: per element, how far eager moved under nudged inputs (`nudged_runs`): rule 2's
    flips are accepted only where it is at least `FLIP_SENSITIVITY` of thunder's deviation; 0 or None (no probe:
    random networks) accepts none. None also grants rule 1's cancellation term unshown.
    ``nudged``: the same tensor's (sample, truth) pairs from `nudged_runs`: their median error is eager's noise
    beside its error on the example (rule 1), their largest scale drift widens rule 3's bound.
    ``precision``: the narrowest dtype the example computes in (bfloat16 under autocast): where it is narrower than the
    tensor's, its tolerances apply. Measured: under bfloat16 autocast, a float32 embedding gradient is a bfloat16
    value, eager's the nearest to the truth (1.59375 for 1.59353) and thunder's one ulp away (1.5859375), 34x eager's
    error by float32's rules.
    """
    if actual is None or expected is None:
        if actual is None and expected is None:
            return None
        return Mismatch(
            "no gradient under thunderfx, but eager has one" if actual is None else "gradient where eager has none"
        )
    if actual.shape != expected.shape or actual.dtype != expected.dtype:
        return Mismatch(f"shape/dtype {tuple(actual.shape)}/{actual.dtype} != {tuple(expected.shape)}/{expected.dtype}")
    if not actual.numel():
        return None
    dtype = (
        precision
        if precision is not None and torch.finfo(precision).eps > torch.finfo(expected.dtype).eps
        else expected.dtype
    )
    rtol, atol, eager_factor, example_ulps, _ = TOLERANCES[dtype]
    eps, tiny = torch.finfo(dtype).eps, torch.finfo(dtype).tiny
    got, want = actual.detach().double().cpu(), expected.detach().double().cpu()
    if not torch.isfinite(got).all():
        return Mismatch(f"{int((~torch.isfinite(got)).sum())}/{got.numel()} non-finite elements")
    eager, eager_error = want, 0.0
    if reference is not None:
        want = reference.detach().cpu()
        eager_error = (eager - want).abs().max().item()
    scale = want.abs().max().item()
    diff = (got - want).abs()
    noise = max(eager_error, _median_error(nudged))
    if reference is None and expected.dtype == torch.float64:
        # float64 has no wider truth: eager's own spread over the nudged copies is its noise where the truth cancels
        # (layer_norm of width 1: truth 0, thunderfx 0, eager -1.8e-15, nudged 3-7e-15, float32 twin x eps ratio 2e-16).
        noise = max(noise, _median_error([(truth, expected) for _, truth in nudged]))
    cancelled = sensitivity is None or cancellation(noise, scale, eps)
    all_got, all_want = got, want

    def found(text):
        error = diff.max().item() / (scale or 1.0)
        eager_relative = eager_error / (scale or 1.0) if reference is not None else None
        # A cancellation's accuracy by the example's scale (bfloat16 layer_norm of width 2: thunderfx 93x its own scale
        # off, 4 ulps of the example's; right in float32).
        below = cancelled and reference is not None and example_scale > scale
        against_example = (diff.max().item() / example_scale, eager_error / example_scale) if below else None
        drift = _drift(all_got, all_want) if scale else float("inf")
        return Mismatch(text, error, eager_relative, drift, eps, cancelled=against_example)

    slack = eager_factor * noise + (example_ulps * eps * example_scale if cancelled else 0.0)
    bad = diff > rtol * want.abs() + atol * scale + tiny + slack
    flips = (
        dtype in FLIP_SHARE
        and int(bad.sum()) <= max(1, FLIP_SHARE[dtype] * got.numel())
        and bool((diff[bad] <= scale).all())
        and sensitivity is not None  # a flip is shown by the probe or not accepted
        and bool((torch.as_tensor(sensitivity).expand_as(diff)[bad] >= FLIP_SENSITIVITY * diff[bad]).all())
    )
    if bad.any() and not flips:
        worst = int(diff.argmax())
        return found(
            f"max abs diff {diff.max().item():.4g} on {int(bad.sum())}/{got.numel()} elements "
            f"(at flat index {worst}: {got.flatten()[worst].item():.6g} vs {want.flatten()[worst].item():.6g}; "
            f"max |{'float64 ' if reference is not None else ''}eager| {scale:.4g}, slack {slack:.3g}"
            f"{'' if cancelled else ', judged on its own scale'})"
        )
    # Rule 3 on the elements that are not flips (a flip moves one element by up to the scale).
    kept = ~bad
    got, want, eager = got[kept], want[kept], eager[kept]
    alpha = _scale_factor(got, want)
    if alpha is None:
        return None
    nudged_drift = max((_drift(run.cpu()[kept], truth.cpu()[kept]) for run, truth in nudged), default=0.0)
    bound, eager_drift, eager_noise = systematic_bound(eager, want, dtype, reference is not None, nudged_drift)
    if dtype == torch.float64 and cancelled:
        # No wider reference measures float64 noise: allow the drift that rule 1's slack allows (measured: an input
        # gradient of scale 1.9e-7 in an example of scale 8.4, off by one ulp of S: alpha - 1 = 1.1e-9).
        bound += (example_ulps * eps * example_scale + eager_factor * noise) / scale
    if scale < eps**0.5 * example_scale and (eager_noise > CLEAN_NOISE if reference is not None else cancelled):
        return None
    if abs(alpha - 1) > bound:
        return found(
            f"systematic scale error: thunderfx ~ {alpha:.6g} x {'float64 ' if reference is not None else ''}eager "
            f"(least squares over {got.numel()} elements; eager's own factor {1 + eager_drift:.6g}, "
            f"relative noise {eager_noise:.3g}{f', nudged copies drift up to {nudged_drift:.3g}' if nudged else ''})"
        )
    return None


def cancellation(noise, scale, eps):
    """Whether a tensor of largest |truth| ``scale``, on which eager's error is ``noise``, is shown to be a
    cancellation (rule 1): its truth is all zero, or eager's error reaches `CANCELLATION_EPS` ulps of its scale."""
    return scale == 0 or noise >= CANCELLATION_EPS * eps * scale


def _median_error(nudged):
    """The median over ``nudged`` (sample, truth) pairs of max|sample - truth| (0 without pairs): eager's typical
    error on a tensor, which one lucky sample does not show and one flipped element does not inflate."""
    errors = sorted((run.double().cpu() - truth.double().cpu()).abs().max().item() for run, truth in nudged)
    errors = [error for error in errors if math.isfinite(error)]
    return errors[len(errors) // 2] if errors else 0.0


def _drift(x, truth):
    """|alpha - 1| of ``x`` against ``truth`` (0 for an all-zero truth)."""
    alpha = _scale_factor(x.double().cpu(), truth.double().cpu())
    return 0.0 if alpha is None else abs(alpha - 1)


def systematic_bound(eager, want, dtype, measured, nudged_drift=0.0):
    """Rule 3's bound on |alpha - 1| for a tensor whose truth is ``want`` (not all zero), with eager's own drift
    |alpha_eager - 1| and relative noise, both taken as 0 unless eager was ``measured`` against float64.
    ``nudged_drift``: the largest drift of eager on nudged copies of the example, each against its own float64
    truth: one eager sample can happen to be nearly exact where eager's drift is typically larger (measured:
    a float16 input gradient, eager 1.6e-4 on the example itself, up to 3.7e-3 on nudged copies)."""
    drift, eager_factor = TOLERANCES[dtype][4], TOLERANCES[dtype][2]
    eager_drift = _drift(eager, want) if measured else 0.0
    eager_noise = (eager - want).norm().item() / want.norm().item() if measured else 0.0
    # Independent rounding errors of relative size e move alpha by about e / sqrt(n): 3 sigma of
    # that, times the eager factor for thunder's noise being a few times eager's.
    bound = drift + max(eager_factor * eager_drift, nudged_drift) + eager_factor * 3 * eager_noise / want.numel() ** 0.5
    return bound, eager_drift, eager_noise


def truth_name(name):
    """The entry a result's ``name`` is judged against (state after backward: after forward, at the same step)."""
    tensor, at, step = name.partition(AT_STEP)
    return tensor.removesuffix(AFTER_BACKWARD) + AFTER_FORWARD + at + step if tensor.endswith(AFTER_BACKWARD) else name


def _mismatches(thunder_result, eager_result, reference_result, sensitivities, precision):
    """Mismatches of the output and the state after forward (a training step's too), then of the gradients, the state
    after backward and the state training leaves."""
    (thunder_out, thunder_grads), (eager_out, eager_grads) = thunder_result, eager_result
    ref_out, ref_grads = reference_result if reference_result is not None else (None, {})
    # The example's scale is its output's and gradients', not its states' (an input is of order 1).
    truth = [t for n, t in [("output", ref_out), *ref_grads.items()] if t is not None and not is_state(n)]
    truth = truth or [eager_out, *(t for n, t in eager_grads.items() if not is_state(n))]
    example_scale = max((t.detach().abs().max().item() for t in truth if t is not None and t.numel()), default=0.0)
    # A network whose every output and gradient is zero in truth (a log_softmax of width 1 before all else) leaves
    # only rounding to compare, of terms of its inputs' scale (measured: bfloat16, truth 1e-17, thunder 2.4e-3).
    states = [t for n, t in eager_grads.items() if is_state(n) and t is not None and t.is_floating_point()]
    inputs = max((t.detach().abs().max().item() for t in states if t.numel()), default=0.0)
    if example_scale < torch.finfo(eager_out.dtype).eps * inputs:
        example_scale = inputs
    forward = mismatch(
        thunder_out, eager_out, ref_out, example_scale, *sensitivities.get("output", (None, ())), precision
    )
    forward, gradients = ([forward.named("output")] if forward else []), []
    for name in eager_grads:
        want = truth_name(name)
        found = mismatch(
            thunder_grads.get(name), eager_grads[want], ref_grads.get(want), example_scale,
            *sensitivities.get(want, (None, ())), precision,
        )  # fmt: skip
        if found and is_state(name):
            after_forward = name.split(AT_STEP)[0].endswith(AFTER_FORWARD)
            (forward if after_forward else gradients).append(found.named(name, state=True))
        elif found and is_output(name):
            forward.append(found.named(name))
        elif found:
            gradients.append(found.named(f"grad of {name}"))
    return forward, gradients


def _sensitivities(eager_result, nudged):
    """Per tensor ("output" or a gradient's name): the largest move of each element over the `nudged_runs`, and
    the tensor's (sample, truth) pairs from the runs that have a truth."""
    eager_out, eager_grads = eager_result
    tensors = {"output": eager_out, **eager_grads}

    def pick(result, name):
        return None if result is None else result[0] if name == "output" else result[1].get(name)

    found = {}
    for name, base in tensors.items():
        runs = [pick(run, name) for run, _ in nudged]
        if base is None or not runs or any(r is None or r.shape != base.shape for r in runs):
            found[name] = (0.0, ())
            continue
        moves = torch.stack([(r.double() - base.double()).abs().cpu() for r in runs]).amax(0)
        pairs = [(pick(run, name), pick(truth, name)) for run, truth in nudged]
        pairs = tuple((r, t) for r, t in pairs if t is not None and t.shape == r.shape)
        found[name] = (moves if pairs else None, pairs)
    return found


def compare(thunder_result, eager_result, reference_result=None, probe=None, precision=None):
    """The mismatches of ``thunder_result`` against eager as ``(forward, gradients)`` lists of `Mismatch`.

    With ``reference_result`` (a `float64_reference` run), each tensor is judged against it.
    ``probe``: a callable returning `nudged_runs` of the example, called only when something does not
    match; without it, no element is a low-precision flip (rule 2) and every tensor may be a cancellation (rule 1's
    example-scale term applies unshown). ``precision``: see `mismatch`.
    """
    if probe is None:
        return _mismatches(thunder_result, eager_result, reference_result, {}, precision)
    unprobed = dict.fromkeys(["output", *eager_result[1]], (0.0, ()))
    forward, gradients = _mismatches(thunder_result, eager_result, reference_result, unprobed, precision)
    if forward or gradients:
        sensitivities = _sensitivities(eager_result, probe())
        forward, gradients = _mismatches(thunder_result, eager_result, reference_result, sensitivities, precision)
    return forward, gradients


def right_one_precision_up(thunder_run, net, x, cotangent, reference, training=None):
    """Whether thunderfx is right on the example one precision up: ``thunder_run(net, x, cotangent, training)``
    (thunderfx's `forward_backward`, or None where it failed) on `one_precision_up` copies, judged against the float64
    ``reference``."""
    net, x, cotangent, training = one_precision_up(net, x, cotangent, training)
    eager_net = copy.deepcopy(net)
    try:
        eager = forward_backward(eager_net, eager_net, fresh_input(x), cotangent, training)
    except Exception:  # the network pins a dtype (an op's literal argument): no wider version of it
        return False
    truth = reference if cotangent.dtype != torch.float64 else None
    result = thunder_run(net, x, cotangent, training)  # None when thunderfx failed there
    if result is None:
        return False
    forward, gradients = compare(result, eager, truth, lambda: nudged_runs(net, x, cotangent, training=training))
    return not forward and not gradients


def failure_class(forward, gradients, right_one_precision_up=None):
    """The failure class of `compare`'s mismatches (None when there are none).

    "accuracy" when every mismatch was measured against float64 and is `Mismatch.bounded` (none missing, misshapen
    or non-finite), and ``right_one_precision_up()`` says thunderfx is right on the same network in a wider dtype:
    thunder's error, some times eager's, is a matter of precision. Else "forward-divergence" (the output differs),
    "gradient-divergence" (a gradient does), or "state-divergence" (only a tensor the network mutates in place does).
    """
    mismatches = forward + gradients
    if not mismatches:
        return None
    if all(m.bounded for m in mismatches) and right_one_precision_up is not None and right_one_precision_up():
        return "accuracy"
    if any(not m.state for m in forward):
        return "forward-divergence"
    return "gradient-divergence" if any(not m.state for m in gradients) else "state-divergence"


def crash_signature(error_type, message):
    """What tells two crashes apart: the exception's type and its message's first line, with numbers, addresses and
    the contents of braces (dynamo's guard assertion lists its symbols in a dict) blanked: they change with sizes and
    runs. Where dynamo wraps a backend's exception ("backend='...' raised:"), the wrapped one's: thunder's splitter
    crashing and torch failing in thunder's fallback differ, and one bug reads alike raised while compiling or after."""
    lines = [line for line in message.strip().splitlines() if line.strip()] or [""]
    if error_type == "BackendCompilerFailed" and lines[0].endswith(" raised:") and ": " in "".join(lines[1:2]):
        return crash_signature(*lines[1].split(": ", 1))
    first = re.sub(r"\{[^{}]*\}", "{...}", lines[0])
    return f"{error_type}: " + re.sub(r"0x[0-9a-fA-F]+|\d+(?:\.\d+)?", "#", first)[:200]


def accuracy_ratio(mismatches):
    """The largest ratio of thunder's error to eager's over ``mismatches`` (inf where eager was exact)."""
    return max((m.error / m.eager_error if m.eager_error else float("inf")) for m in mismatches)
