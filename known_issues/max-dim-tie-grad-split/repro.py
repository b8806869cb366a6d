"""Repro: gradient-divergence (thunder-general) of thunderfx against eager PyTorch.

Found with lightning-thunder 0.2.6, torch 2.9.1+cu128; converter fixed: thunder 0.2.6's _checkpoint_function_converter, wrapped to copy each replaced node's meta to its replacement.
First observed: grad of layer2.weight: max abs diff 1.729 on 2/14 elements (at flat index 4: -1.72923 vs 0; max |float64 eager| 425.6, slack 0.000869)
Exit status: 0 thunderfx matches, 1 this failure reproduces, 2 anything else (could not run, another failure).
Needs only torch and lightning-thunder.
"""

from __future__ import annotations

import os
import sys


def _could_not_run(kind, value, tb):
    sys.__excepthook__(kind, value, tb)
    print("COULD NOT RUN: the repro failed before thunderfx ran", flush=True)
    sys.stderr.flush()
    os._exit(2)


if __name__ == "__main__":  # first in a repro.py: an exception before `main` (an import that fails) exits 2, not 1
    sys.excepthook = _could_not_run
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


class RMSNorm(nn.Module):
    """RMS normalisation as LLaMA-style code writes it by hand."""

    def __init__(self, dim: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        # Computed in at least float32, as LLaMA code does with x.float(); never down-cast a float64
        # input (inductor, which thunderfx falls back to, skips such casts and so differs from eager).
        wide = x.to(torch.promote_types(x.dtype, torch.float32))
        norm = wide * torch.rsqrt(wide.pow(2).mean(dim=-1, keepdim=True) + self.eps)
        return norm.to(x.dtype) * self.weight


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.layer0 = nn.ReLU()
        self.layer2 = RMSNorm(14)

    def forward(self, x):
        x = self.layer0(x)
        x = fold(adapt(x, (4, 4), -8.8439, 8.9584, 0).to(adapt(x, (2, 2), -2.3905, 8.8586, 1)), x)
        x = self.layer2(x)
        x = fold(adapt(x, (2, 3, 1), -1000.0, 1000.0, 0).max(0), x)
        return x


class PlainNet(Net):
    """``Net`` without its checkpoints: the checkpointed functions are called directly."""

    def forward(self, x):
        x = self.layer0(x)
        x = fold(adapt(x, (4, 4), -8.8439, 8.9584, 0).to(adapt(x, (2, 2), -2.3905, 8.8586, 1)), x)
        x = self.layer2(x)
        x = fold(adapt(x, (2, 3, 1), -1000.0, 1000.0, 0).max(0), x)
        return x



SEED = 24335
DTYPE = torch.float32
DEVICE = 'cpu'
INPUT_SHAPE = (2, 14)
OUTPUT_SHAPE = (2, 14)


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
EXPECTED_CLASS = 'gradient-divergence'
EXPECTED_ERROR = ''
TIME_LIMIT_S = None


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
# Training (`Training`): the tensors of step k > 0 are named "<name> at step k"; what the last optimizer step leaves
# (parameters, the optimizer's state) "<name> after training".
AT_STEP = " at step "
AFTER_TRAINING = " after training"
# The optimizers of training steps, with the settings of a fine-tuning run (`Training`).
OPTIMIZERS = {
    "sgd": lambda parameters: torch.optim.SGD(parameters, lr=1e-2, momentum=0.9),
    "adamw": lambda parameters: torch.optim.AdamW(parameters, lr=1e-3, weight_decay=1e-2),
}
# The copy of an example one precision up (the same values in a wider dtype): see `fuzz.judge.parity.failure_class`.
ONE_PRECISION_UP = {torch.bfloat16: torch.float32, torch.float16: torch.float32, torch.float32: torch.float64}
_WRAPPED = "_checkpoint_wrapped_module."


def is_state(name):
    """Whether a result entry is a mutated tensor's state rather than a gradient (or a step's output)."""
    return name.split(AT_STEP)[0].endswith((AFTER_FORWARD, AFTER_BACKWARD, AFTER_TRAINING))


def is_output(name):
    """Whether a result entry is a training step's output (`Training`)."""
    return name.startswith("output" + AT_STEP)


class Training:
    """Training steps: the example's own forward and backward is step 0, ``batches`` are the later steps' (input,
    cotangent) pairs, and ``optimizer`` (a key of `OPTIMIZERS`) steps after each backward.

    Every step starts from ``starts[k]`` (the parameters and buffers, by name): eager's own trajectory
    (`with_starts`), so that each step of another run is judged from the same place and differences do not
    compound; its optimizer's state carries from step to step.
    """

    def __init__(self, optimizer, batches, starts=None):
        self.optimizer, self.batches, self.starts = optimizer, list(batches), starts

    def to(self, dtype):
        """The same steps in ``dtype`` (float inputs, cotangents and starts)."""

        def cast(t):
            return t.to(dtype) if t.is_floating_point() else t

        starts = None if self.starts is None else [{k: cast(t) for k, t in s.items()} for s in self.starts]
        return Training(self.optimizer, [(cast(x), cast(c)) for x, c in self.batches], starts)

    def with_starts(self, net, x, cotangent):
        """These steps starting from where eager's own steps on ``net`` (not changed) leave each one."""
        net, starts = copy.deepcopy(net), []
        optimizer = _optimizer(self.optimizer, list(net.parameters()))
        for x_k, cotangent_k in [(x, cotangent), *self.batches]:
            starts.append(_state(net))
            optimizer.zero_grad(set_to_none=True)
            torch.manual_seed(0)
            net(fresh_input(x_k)).backward(cotangent_k)
            optimizer.step()
        return Training(self.optimizer, self.batches, starts)


def _optimizer(name, parameters):
    """Optimizer ``name`` of `OPTIMIZERS` over ``parameters`` (one that does nothing for a network without any: its
    steps still run the compiled network again, on new inputs)."""
    return OPTIMIZERS[name](parameters) if parameters else torch.optim.SGD([torch.zeros(0)], lr=0.0)


def _state(net):
    """Copies of ``net``'s parameters and buffers, by name (checkpoint_wrapper's prefix removed, so that a network and
    its ``PlainNet`` share them)."""
    return {
        name.replace(_WRAPPED, ""): t.detach().clone() for name, t in [*net.named_parameters(), *net.named_buffers()]
    }


def _train(fn, net, x, cotangent, training):
    """`forward_backward` of each step of ``training`` from its start, each followed by the optimizer's step; step k's
    tensors named with `AT_STEP`, and the parameters and optimizer state the last step leaves with `AFTER_TRAINING`."""
    parameters = dict(net.named_parameters())
    optimizer = _optimizer(training.optimizer, list(parameters.values()))
    output, results = None, {}
    steps = zip([(x, cotangent), *training.batches], training.starts, strict=True)
    for step, ((x_k, cotangent_k), start) in enumerate(steps):
        with torch.no_grad():
            for name, t in [*parameters.items(), *net.named_buffers()]:
                t.copy_(start[name.replace(_WRAPPED, "")])
        optimizer.zero_grad(set_to_none=True)
        out, found = forward_backward(fn, net, fresh_input(x_k) if step else x_k, cotangent_k)
        found = {name: t if t is None else t.detach().clone() for name, t in found.items()}
        if step == 0:
            output, results = out, found
        else:
            results[f"output{AT_STEP}{step}"] = out
            results.update((f"{name}{AT_STEP}{step}", t) for name, t in found.items())
        optimizer.step()
    # (The buffers training leaves are the last step's state after backward, judged there against its state after
    # forward: eager's checkpoint recomputation updates BatchNorm's statistics a second time.)
    end = {f"parameter {name}": p for name, p in parameters.items()}
    for name, p in parameters.items():
        end.update((f"optimizer {key} of {name}", t) for key, t in optimizer.state.get(p, {}).items())
    results.update(
        (name.replace(_WRAPPED, "") + AFTER_TRAINING, _kept(t)) for name, t in end.items() if torch.is_tensor(t)
    )
    return output, results


class SavedForBackward:
    """What autograd saves for backward during the first call of ``fn`` (`measuring`): the distinct storages saved
    (their bytes by address), other than ``net``'s parameters and buffers, the input's and the output's (a checkpoint
    saves its region's inputs; what it recomputes, its own hooks hold, unseen here)."""

    def __init__(self, net, x):
        tensors = [*net.parameters(), *net.buffers(), x]
        self._excluded = {t.untyped_storage().data_ptr() for t in tensors}
        self.storages, self.measured = {}, False
        # A generator's state (a uint8 vector), which a checkpoint keeps to replay its region's random numbers: eager's
        # in the checkpoint's frame (`preserve_rng_state`), unseen here; thunderfx's inductor fallback through
        # `save_for_backward` (5056 B on CPU whatever the network's size). Not counted on either side.
        self._rng_states = {torch.get_rng_state().numel()}
        # An exception of the meter's own, raised inside the measured call (thunder's forward, which would take it
        # for its own): kept here for the caller to raise after the call.
        self.error = None

    @property
    def bytes(self):
        return sum(self.storages.values())

    @property
    def largest(self):
        """The largest storage saved (0: none)."""
        return max(self.storages.values(), default=0)

    def _pack(self, t):
        if t.dtype == torch.uint8 and t.dim() == 1 and t.numel() in self._rng_states:
            return t.detach()
        self._count(t, lambda key, size: self.storages.setdefault(key, size) if key not in self._excluded else None)
        return t.detach()  # (``t`` itself would keep the graph of an output saved by its own op alive: torch's docs)

    def _count(self, t, record):
        """``record(address, bytes)`` of ``t``'s storage; an exception kept in `error` (it runs inside the call)."""
        try:
            storage = t.untyped_storage()
            record(storage.data_ptr(), storage.nbytes())
        except Exception as error:
            self.error = self.error or error

    def measuring(self, fn):
        """``fn``, measuring what its first call saves (later calls, a training run's later steps, run as they are)."""

        def measured(x):
            if self.measured:
                return fn(x)
            self.measured = True
            with torch.autograd.graph.saved_tensors_hooks(self._pack, lambda t: t):
                output = fn(x)
            # The output is alive for backward anyway (thunder saves a region's last output where eager recomputes it).
            self._count(output, lambda key, size: self.storages.pop(key, None))
            return output

        return measured


def saved_by(fn, net, x):
    """The `SavedForBackward` of one seeded forward ``fn(x)`` of ``net`` (its `error` for the caller to raise)."""
    meter = SavedForBackward(net, x)
    torch.manual_seed(0)
    meter.measuring(fn)(x)
    return meter


def mutable_state(net, x, suffix):
    """Copies of what a run may mutate, keyed "<name><suffix>": a float input and every buffer (as float64
    when it is an integer count)."""
    tensors = {"input": x} if x.is_floating_point() else {}
    tensors.update((f"buffer {name.replace(_WRAPPED, '')}", buffer) for name, buffer in net.named_buffers())
    return {name + suffix: _kept(t) for name, t in tensors.items()}


def _kept(t):
    """A copy of ``t`` to compare later: float as it is, an integer count as float64."""
    return t.detach().clone() if t.is_floating_point() else t.detach().double()


def fresh_input(x):
    """A new leaf copy of ``x`` that requires grad exactly when ``x`` does."""
    return x.detach().clone().requires_grad_(x.requires_grad)


def forward_backward(fn, net, x, cotangent, training=None):
    """Run ``fn(x)``, then backward with ``cotangent``; return the output and the input's and parameters' gradients.

    ``fn`` is ``net`` itself (eager) or a compiled wrapper of it. Gradients are keyed
    ``"input"`` and by parameter name (checkpoint_wrapper's prefix removed, so a network and
    its ``PlainNet`` share names); a parameter that received no gradient maps to None. The
    `mutable_state` after forward and after backward is in the same mapping.
    The global RNG is seeded first, so every run of a network draws the same random numbers.
    With ``training`` (`Training`), every step's and the state training leaves, all in one mapping.
    """
    if training is not None:
        return _train(fn, net, x, cotangent, training)
    torch.manual_seed(0)
    output = fn(x)
    after_forward = mutable_state(net, x, AFTER_FORWARD)
    output.backward(cotangent)
    grads = {"input": x.grad}
    grads.update((name.replace(_WRAPPED, ""), p.grad) for name, p in net.named_parameters())
    return output.detach(), {**grads, **after_forward, **mutable_state(net, x, AFTER_BACKWARD)}


def float64_reference(net, x, cotangent, training=None):
    """``forward_backward`` of a float64 copy of ``net`` on float64 copies of ``x``, ``cotangent`` and ``training``
    (each step from the same start as the example's, in float64)."""
    net = copy.deepcopy(net).double()
    x = fresh_input(x.double()) if x.is_floating_point() else x
    return forward_backward(net, net, x, cotangent.double(), training and training.to(torch.float64))


def nudged_runs(net, x, cotangent, runs=NUDGES, training=None):
    """Eager on ``runs`` copies of ``net`` and ``x`` whose floating-point values are moved by up to `NUDGE_ULPS`
    ulps at random: where an element jumps, eager sits at a discontinuity. Each run is a pair of a sample of eager
    and its truth, so that eager's own error and drift can be seen over several samples, not one (rules 1 and 3):
    the copy's `forward_backward` and its `float64_reference`; for a float64 network, which has no wider truth,
    the copy's float64 run as the truth and, as the sample, that run moved by its float32 twin's error scaled down by
    the ratio of the epsilons (rounding errors scale with eps); the truth is None where no float32 twin runs.
    With ``training``, each copy trains along its own eager trajectory, its later steps' inputs nudged too."""
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
        steps = None
        if training is not None:
            steps = Training(training.optimizer, [(nudge(x_k), c_k) for x_k, c_k in training.batches])
            steps = steps.with_starts(nudged, nudged_x, cotangent)
        # The truth first, from copies: the run mutates its input and buffers (in-place layers, BatchNorm).
        if cotangent.dtype != torch.float64:
            truth = float64_reference(nudged, nudged_x, cotangent, steps)
            results.append((forward_backward(nudged, nudged, nudged_x, cotangent, steps), truth))
        else:
            twin = _float32_twin(nudged, nudged_x, cotangent, steps)
            results.append(_float64_rounding_sample(forward_backward(nudged, nudged, nudged_x, cotangent, steps), twin))
    return results


def _float32_twin(net, x, cotangent, training=None):
    """`forward_backward` of float32 copies of a float64 example; None where the network pins a dtype or the twin
    is not finite (no evidence of float64's rounding then)."""
    net = copy.deepcopy(net).float()
    x = fresh_input(x.float()) if x.is_floating_point() else x
    try:
        twin = forward_backward(net, net, x, cotangent.float(), training and training.to(torch.float32))
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


def one_precision_up(net, x, cotangent, training=None):
    """Copies of an example (and its ``training``) in the next wider dtype (`ONE_PRECISION_UP`), holding exactly the
    same values."""
    dtype = ONE_PRECISION_UP[cotangent.dtype]
    net = copy.deepcopy(net).to(dtype)
    x = fresh_input(x.to(dtype)) if x.is_floating_point() else x
    return net, x, cotangent.to(dtype), training and training.to(dtype)


"""The oracle's rules: each tensor of thunderfx's run against eager's and the float64 truth, and the failure class.

Shared by the harness and every repro.py: this module's source is copied verbatim into each repro, after
`fuzz.run.passes`'s and without its import of it, so the harness's verdict and the repro's exit code come from the
same code. It must import nothing but torch and `fuzz.run.passes`.
"""

import copy
import math
import re

import torch


# How far thunderfx may be from the truth, per dtype (docs/oracle.md has the measurements):
# (rtol, atol, eager_factor, example_ulps, drift). "ref" is a float64 eager run of the same weights (eager itself
# for float64 networks); eager's own error against it is the measure of how noisy a tensor is in this dtype.
# 1. Elementwise: |thunder - ref| <= rtol |ref| + atol max|ref| + tiny + k noise [+ example_ulps eps S], all of the
#    tensor's own but the last: noise is eager's error on this tensor (the largest of its error on the example and
#    the median over the nudged copies of rule 2, each against its own truth; for a float64 network, a float32 copy's
#    error scaled by the ratio of the epsilons), tiny the dtype's smallest normal number (the floor is relative:
#    atol max|ref|). The example's scale S (the largest |ref| over the output and all gradients) enters only where
#    the tensor is shown to be a cancellation (`cancelled`): its truth is all zero, or eager's own error on it is
#    at least `CANCELLATION_EPS` eps of its scale. Measured: an attention key bias's gradient is exactly 0, computed
#    as a sum of terms of order S (float16: eager 3e-5, thunder 2.7e-4); a float64 input gradient of scale 1.9e-7 in
#    an example of scale 8.4, off by one ulp of S (its float32 copy is 5x its scale off). A clean tensor is judged
#    by its own scale: a 20% error on a bfloat16 gradient of scale 3 fails beside a tensor of scale 100.
#    rtol is ~1000 ulps for float32 (thunder reorders float ops: observed differences ~1 ulp),
#    ~1 ulp for bfloat16/float16, 1e-9 for float64.
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

    ``error``: max|actual - truth| / max|truth| (inf for a missing, misshapen or non-finite
    tensor); ``eager_error``: eager's, against the same float64 truth (None without one); ``drift``:
    the systematic scale error |alpha - 1| of actual against truth over all elements (inf where it has
    no meaning, as for ``error``); ``eps``: the tensor's dtype's machine epsilon; ``state``: the tensor
    is one the network mutates (`mutable_state`), not the output or a gradient; ``name``: the
    tensor's, once `named`.
    """

    error: float
    eager_error: float | None
    drift: float
    eps: float
    state: bool
    name: str

    def __new__(cls, text, error=float("inf"), eager_error=None, drift=float("inf"), eps=0.0, state=False, name=""):
        mismatch = super().__new__(cls, text)
        mismatch.error, mismatch.eager_error, mismatch.drift, mismatch.eps = error, eager_error, drift, eps
        mismatch.state, mismatch.name = state, name
        return mismatch

    def named(self, name, state=False):
        """The same mismatch, its description headed by the tensor's name; ``state``: a mutated tensor's."""
        return Mismatch(f"{name}: {self}", self.error, self.eager_error, self.drift, self.eps, state, name)

    @property
    def bounded(self):
        """Whether it is small enough to be a matter of precision (see `ACCURACY_RATIO`), measured against float64."""
        if self.eager_error is None:
            return False
        within_eager = self.error <= ACCURACY_RATIO * max(self.eager_error, self.eps / 8)
        return within_eager and self.error <= ACCURACY_EPS * self.eps and self.drift <= ACCURACY_DRIFT_EPS * self.eps


def _scale_factor(x, ref):
    """The least-squares factor alpha with x ~ alpha * ref (None for an all-zero ref)."""
    norm2 = (ref * ref).sum().item()
    return (x * ref).sum().item() / norm2 if norm2 > 0 else None


def mismatch(actual, expected, reference=None, example_scale=0.0, sensitivity=None, nudged=()):
    """None when ``actual`` matches within its dtype's tolerance (see `TOLERANCES`), else a `Mismatch`.

    ``expected`` is eager's tensor; ``reference``, when given, the float64 eager one, which
    ``actual`` is then judged against with eager's own error as the measure of noise.
    ``example_scale`` is the largest |reference| over the example's output and gradients.
    ``sensitivity``: per element, how far eager moved under nudged inputs (`nudged_runs`): rule 2's
    flips are accepted only where it is at least `FLIP_SENSITIVITY` of thunder's deviation; 0 or None (no probe:
    random networks) accepts none. None also grants rule 1's cancellation term unshown.
    ``nudged``: the same tensor's (sample, truth) pairs from `nudged_runs`: their median error is eager's noise
    beside its error on the example (rule 1), their largest scale drift widens rule 3's bound.
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
    rtol, atol, eager_factor, example_ulps, _ = TOLERANCES[expected.dtype]
    eps, tiny = torch.finfo(expected.dtype).eps, torch.finfo(expected.dtype).tiny
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
    cancelled = sensitivity is None or cancellation(noise, scale, eps)

    all_got, all_want = got, want

    def found(text):
        error = diff.max().item() / (scale or 1.0)
        eager_relative = eager_error / (scale or 1.0) if reference is not None else None
        return Mismatch(text, error, eager_relative, _drift(all_got, all_want) if scale else float("inf"), eps)

    slack = eager_factor * noise + (example_ulps * eps * example_scale if cancelled else 0.0)
    bad = diff > rtol * want.abs() + atol * scale + tiny + slack
    flips = (
        expected.dtype in FLIP_SHARE
        and int(bad.sum()) <= max(1, FLIP_SHARE[expected.dtype] * got.numel())
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
    bound, eager_drift, eager_noise = systematic_bound(eager, want, expected.dtype, reference is not None, nudged_drift)
    if expected.dtype == torch.float64 and cancelled:
        # No wider reference measures float64 noise: allow the drift that rule 1's eps S slack allows (measured:
        # an input gradient of scale 1.9e-7 in an example of scale 8.4, off by one ulp of S: alpha - 1 = 1.1e-9).
        bound += example_ulps * eps * example_scale / scale
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
    """The entry a result's ``name`` is judged against (state after backward: the state after forward, at the same
    training step)."""
    tensor, at, step = name.partition(AT_STEP)
    return tensor.removesuffix(AFTER_BACKWARD) + AFTER_FORWARD + at + step if tensor.endswith(AFTER_BACKWARD) else name


def _mismatches(thunder_result, eager_result, reference_result, sensitivities):
    """Mismatches of the output and the state after forward (a training step's too), then of the gradients, the state
    after backward and the state training leaves."""
    (thunder_out, thunder_grads), (eager_out, eager_grads) = thunder_result, eager_result
    ref_out, ref_grads = reference_result if reference_result is not None else (None, {})
    # The example's scale is its output's and gradients', not its states' (an input is of order 1).
    truth = [t for n, t in [("output", ref_out), *ref_grads.items()] if t is not None and not is_state(n)]
    truth = truth or [eager_out, *(t for n, t in eager_grads.items() if not is_state(n))]
    example_scale = max((t.detach().abs().max().item() for t in truth if t is not None and t.numel()), default=0.0)
    forward = mismatch(thunder_out, eager_out, ref_out, example_scale, *sensitivities.get("output", (None, ())))
    forward, gradients = ([forward.named("output")] if forward else []), []
    for name in eager_grads:
        want = truth_name(name)
        found = mismatch(
            thunder_grads.get(name), eager_grads[want], ref_grads.get(want), example_scale,
            *sensitivities.get(want, (None, ())),
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
        # No truth to measure eager's error by (a float64 network without a float32 twin): judged as unprobed.
        found[name] = (moves if pairs else None, pairs)
    return found


def compare(thunder_result, eager_result, reference_result=None, probe=None):
    """The mismatches of ``thunder_result`` against eager as ``(forward, gradients)`` lists of `Mismatch`.

    With ``reference_result`` (a `float64_reference` run), each tensor is judged against it.
    ``probe``: a callable returning `nudged_runs` of the example, called only when something does not
    match; without it, no element is a low-precision flip (rule 2) and every tensor may be a cancellation (rule 1's
    example-scale term applies unshown).
    """
    if probe is None:
        return _mismatches(thunder_result, eager_result, reference_result, {})
    forward, gradients = _mismatches(
        thunder_result, eager_result, reference_result, dict.fromkeys(["output", *eager_result[1]], (0.0, ()))
    )
    if forward or gradients:
        forward, gradients = _mismatches(
            thunder_result, eager_result, reference_result, _sensitivities(eager_result, probe())
        )
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
    thunder's error, some times eager's, is a matter of precision. Else
    "forward-divergence" (the output differs), "gradient-divergence" (a gradient does), or "state-divergence"
    (only a tensor the network mutates in place does).
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
    the contents of braces blanked (they change with sizes and runs)."""
    first = (message.strip().splitlines() or [""])[0]
    # A dict in a message lists what changes from run to run (dynamo's guard assertion names the symbols it knows).
    first = re.sub(r"\{[^{}]*\}", "{...}", first)
    return f"{error_type}: " + re.sub(r"0x[0-9a-fA-F]+|\d+(?:\.\d+)?", "#", first)[:200]


def accuracy_ratio(mismatches):
    """The largest ratio of thunder's error to eager's over ``mismatches`` (inf where eager was exact)."""
    return max((m.error / m.eager_error if m.eager_error else float("inf")) for m in mismatches)


"""The memory contract of checkpointing: thunderfx's checkpointed network must not save for backward much more than
eager's, where its checkpoints free less than eager's do (docs/oracle.md, "Memory contract").

Shared by the harness and every repro.py: this module's source is copied verbatim into each repro (after
`fuzz.judge.parity`'s). It must import nothing.
"""

# A failure saves more than MEMORY_RATIO x what eager's checkpointed network saves, and more than the floor beyond it.
# The floor is 64 KiB (the figure for networks of real sizes) or, in the campaign's small networks, the
# largest single tensor eager saves without checkpoints, whichever is smaller: thunder may keep a tensor or two that
# eager does not (docs/oracle.md, "Memory contract", has the measurements).
MEMORY_RATIO = 1.5
MEMORY_FLOOR_BYTES = 64 * 1024
# ... where eager's checkpoints free more than the floor (bytes saved without minus with checkpoints) and thunderfx's
# free less than this share of that: a region that stopped being checkpointed frees nothing, while thunder saving
# more than eager everywhere (float32 copies of float16 activations outside the regions) is not the checkpoints' doing.
MEMORY_FREED_SHARE = 0.5


def saves_too_much(thunder, eager, eager_plain, largest_activation):
    """The tests that need no thunderfx run without checkpoints: thunderfx's checkpointed network (``thunder`` bytes
    saved for backward) over the ratio and the floor beyond eager's (``eager``), where eager's checkpoints free more
    than the floor (``eager_plain``: eager's bytes without checkpoints)."""
    floor = min(MEMORY_FLOOR_BYTES, largest_activation)
    return thunder > MEMORY_RATIO * eager and thunder - eager > floor and eager_plain - eager > floor


def memory_failure(thunder, eager, thunder_plain, eager_plain, largest_activation):
    """The memory failure in words (None: the contract holds), from the bytes thunderfx and eager save for backward
    with checkpoints (``thunder``, ``eager``) and without (``thunder_plain``, ``eager_plain``)."""
    if not saves_too_much(thunder, eager, eager_plain, largest_activation):
        return None
    freed, eager_freed = thunder_plain - thunder, eager_plain - eager
    if freed >= MEMORY_FREED_SHARE * eager_freed:
        return None
    return (
        f"thunderfx's checkpoints free less than {MEMORY_FREED_SHARE:.0%} of what eager's free, and its checkpointed "
        f"network saves more than {MEMORY_RATIO:g}x eager's for backward\n"
        f"thunderfx's checkpointed network saves {thunder} B for backward where eager's saves {eager} B "
        f"({thunder / eager if eager else float('inf'):.3g}x); its checkpoints free {freed} B where eager's free "
        f"{eager_freed} B (without checkpoints thunderfx saves {thunder_plain} B, eager {eager_plain} B)"
    )



def meta_preserving(stock: Converter) -> Converter:
    """Thunder's converter ``stock`` with the fix: every node it replaces passes its ``meta`` to the replacement.

    Thunder's converter replaces each torch op node ``n`` of a checkpointed body by a thunder op
    node through ``n.replace_all_uses_with(thunder_node)``; during the call that method also
    copies ``n.meta`` (example_value, requires_grad, tensor_meta, ...) to ``thunder_node``,
    keeping any entry the replacement already has.
    """

    def converter(gm: torch.fx.GraphModule) -> None:
        replace_all_uses_with = torch.fx.Node.replace_all_uses_with

        def replace_keeping_meta(self, replace_with, *args, **kwargs):
            if not kwargs.get("propagate_meta"):  # torch.fx copies it itself then (and wants an empty meta)
                replace_with.meta = {**self.meta, **replace_with.meta}
            return replace_all_uses_with(self, replace_with, *args, **kwargs)

        try:
            torch.fx.Node.replace_all_uses_with = replace_keeping_meta
            stock(gm)
        finally:
            torch.fx.Node.replace_all_uses_with = replace_all_uses_with

    converter.__name__ = converter.__qualname__ = "meta_preserving_checkpoint_function_converter"
    return converter


def _verdict():
    """(failure class or "pass", the crash signature for a crash, else "") of thunderfx on this network."""
    import copy
    import traceback

    import thunder.dynamo.utils
    import thunder.extend
    from thunder.dynamo import thunderfx

    if CONVERTER == "fixed":
        stock = thunder.dynamo.utils._checkpoint_function_converter
        thunder.dynamo.utils._checkpoint_function_converter = meta_preserving(stock)
    if EXECUTORS:  # else thunder's default executors
        thunder.extend.set_default_executors([thunder.extend.get_executor(name) for name in EXECUTORS])
    net, x, cotangent = make_example()
    training = None
    if "make_batches" in globals():  # a network that trains: each step from eager's own parameters at that step
        training = Training(OPTIMIZER, make_batches()).with_starts(net, x, cotangent)  # noqa: F821
    if TIME_LIMIT_S is not None:
        # Thunder's first compile in a process pays one-off set-up, which the campaign's limit did not count (it runs
        # a time-out once more before counting it): a one-layer network pays it before any clock starts.
        warm_up = torch.nn.Linear(1, 1, device=DEVICE, dtype=DTYPE)
        thunderfx(warm_up)(torch.ones(1, 1, device=DEVICE, dtype=DTYPE)).sum().backward()
    try:
        if RANDOM:
            # Eager and thunder draw different random streams: the expected result is thunderfx's
            # own run of the same network without checkpoints, under the same seed.
            plain, _, _ = make_example(checkpointing=False)
            expected = _limited(lambda: forward_backward(thunderfx(plain), plain, fresh_input(x), cotangent))
            reference, probe = None, None
        thunder_net, thunder_x = copy.deepcopy(net), fresh_input(x)
        meter = SavedForBackward(thunder_net, thunder_x)
        compiled = meter.measuring(thunderfx(thunder_net))
        result = _limited(lambda: forward_backward(compiled, thunder_net, thunder_x, cotangent, training))
    except Exception as error:
        traceback.print_exc()
        return "thunder-crash", crash_signature(type(error).__name__, str(error))
    if meter.error is not None:  # the meter's own exception, raised inside thunderfx's forward: not thunder's
        raise meter.error
    up = None
    if not RANDOM:
        eager_net = copy.deepcopy(net)
        expected = forward_backward(eager_net, eager_net, fresh_input(x), cotangent, training)
        reference = float64_reference(net, x, cotangent, training) if DTYPE != torch.float64 else None
        probe = lambda: nudged_runs(net, x, cotangent, training=training)  # noqa: E731
        if reference is not None:
            up = lambda: right_one_precision_up(_thunderfx_run, net, x, cotangent, reference, training)  # noqa: E731
    forward, gradients = compare(result, expected, reference, probe)
    for line in forward + gradients:
        print(line)
    return failure_class(forward, gradients, up) or _memory_verdict(meter.bytes), ""


def _memory_verdict(thunder_bytes):
    """ "memory" where thunderfx's checkpointed network, saving ``thunder_bytes`` for backward, breaks the memory
    contract beside eager's (each run here a forward of a fresh copy), else "pass"."""
    from thunder.dynamo import thunderfx

    def saved(compile_, checkpointing):
        net, x, _ = make_example(checkpointing)
        meter = saved_by(compile_(net), net, x)
        if meter.error is not None:
            raise meter.error
        return meter

    eager, eager_plain = saved(lambda net: net, True), saved(lambda net: net, False)
    if not saves_too_much(thunder_bytes, eager.bytes, eager_plain.bytes, eager_plain.largest):
        return "pass"
    try:  # (as the campaign: where thunderfx fails without checkpoints there is no measure to compare with)
        thunder_plain = _limited(lambda: saved(thunderfx, False)).bytes
    except Exception as error:
        print(f"thunderfx fails without checkpoints ({type(error).__name__}): the memory contract is not judged")
        return "pass"
    message = memory_failure(thunder_bytes, eager.bytes, thunder_plain, eager_plain.bytes, eager_plain.largest)
    print(message or f"thunderfx saves {thunder_bytes} B, eager {eager.bytes} B: the contract holds")
    return "memory" if message else "pass"


def _limited(thunderfx_run):
    """``thunderfx_run()``; for a recorded time-out, each run under the recorded limit, as in the campaign."""
    if TIME_LIMIT_S is None:
        return thunderfx_run()
    import threading

    watchdog = threading.Timer(TIME_LIMIT_S, _ran_past_the_time_limit)
    watchdog.daemon = True
    watchdog.start()
    try:
        return thunderfx_run()
    finally:
        watchdog.cancel()


def _ran_past_the_time_limit():
    print(f"REPRODUCED: timeout (thunderfx ran past the time limit of {TIME_LIMIT_S:g} s)", flush=True)
    os._exit(1)  # thunderfx's run is not waited for: it may take many minutes more


def _thunderfx_run(net, x, cotangent, training=None):
    """thunderfx's `forward_backward` of ``net``, or None where it raised."""
    from thunder.dynamo import thunderfx

    try:
        return forward_backward(thunderfx(net), net, fresh_input(x), cotangent, training)
    except Exception:
        return None


def main():
    try:
        verdict, signature = _verdict()
    except Exception:
        import traceback

        traceback.print_exc()
        print("COULD NOT RUN: the repro failed outside thunderfx's run")
        return 2
    if verdict == "pass":
        print(f"NOT REPRODUCED: thunderfx matches {'itself without checkpoints' if RANDOM else 'eager'}")
        return 0
    if (verdict, signature) == (EXPECTED_CLASS, EXPECTED_ERROR):
        print(f"REPRODUCED: {verdict} {signature}".rstrip())
        return 1
    print(f"OTHER FAILURE: {verdict} {signature} where {EXPECTED_CLASS} {EXPECTED_ERROR} was recorded")
    return 2


if __name__ == "__main__":
    sys.exit(main())
