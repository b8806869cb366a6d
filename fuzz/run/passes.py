"""The passes of an example: its forward and backward (outputs, gradients and mutated state), the float64
reference, the nudged copies of the oracle's probe and the copy one precision up.

Shared by the harness and every repro.py: this module's source is copied verbatim into each repro (before
`fuzz.judge.tolerance`'s), so the harness's verdict and the repro's exit code come from the same code. It must import
nothing but torch.
"""

import contextlib
import copy

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

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
# The copy of an example one precision up (the same values in a wider dtype): see `fuzz.judge.tolerance.failure_class`.
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
            call_on(net, fresh_input(x_k)).backward(cotangent_k)
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
        tensors = [*net.parameters(), *net.buffers(), *input_tensors(x)]
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

        def measured(*x):
            if self.measured:
                return fn(*x)
            self.measured = True
            with torch.autograd.graph.saved_tensors_hooks(self._pack, lambda t: t):
                output = fn(*x)
            # The output is alive for backward anyway (thunder saves a region's last output where eager recomputes it).
            self._count(output, lambda key, size: self.storages.pop(key, None))
            return output

        return measured


def saved_by(fn, net, x):
    """The `SavedForBackward` of one seeded forward ``fn(x)`` of ``net`` (its `error` for the caller to raise)."""
    meter = SavedForBackward(net, x)
    torch.manual_seed(0)
    call_on(meter.measuring(fn), x)
    return meter


def mutable_state(net, x, suffix):
    """Copies of what a run may mutate, keyed "<name><suffix>": each float input and every buffer (as float64
    when it is an integer count); of a program's several inputs, whether each requires grad too."""
    inputs = dict(zip(input_names(x), input_tensors(x), strict=True))
    tensors = {name: t for name, t in inputs.items() if t.is_floating_point()}
    tensors.update((f"buffer {name.replace(_WRAPPED, '')}", buffer) for name, buffer in net.named_buffers())
    state = {name + suffix: _kept(t) for name, t in tensors.items()}
    if isinstance(x, tuple):  # a program's inputs are state: whether each requires grad (an update may change it)
        state.update((f"{name} requires grad{suffix}", _flag(t.requires_grad)) for name, t in inputs.items())
    return state


def _flag(holds):
    """``holds`` as a float64 scalar judged like any state (1.0 or 0.0: a change is a mismatch beyond any tolerance)."""
    return torch.tensor(float(holds), dtype=torch.float64)


def _kept(t):
    """A copy of ``t`` to compare later: float as it is, an integer count as float64."""
    return t.detach().clone() if t.is_floating_point() else t.detach().double()


def input_tensors(x):
    """The tensors a network is called on: ``x``, or each of a program's inputs (a tuple: `call_on`)."""
    return x if isinstance(x, tuple) else (x,)


def input_names(x):
    """The name of each of `input_tensors`: "input", then "input 1", "input 2"... (a program's value numbers)."""
    return ["input" if index == 0 else f"input {index}" for index in range(len(input_tensors(x)))]


def call_on(fn, x):
    """``fn`` called on ``x``: a tensor, or a tuple of a program's inputs."""
    return fn(*x) if isinstance(x, tuple) else fn(x)


def rebuilt_input(x, make_base):
    """``x`` (`input_tensors`) with each base tensor replaced by the leaf ``make_base(base)`` and each view of a base
    taken again at the same offset and strides: inputs that view one another still do."""
    if not isinstance(x, tuple):
        return make_base(x)
    made = {}
    rebuilt = []
    for t in x:
        base = t if t._base is None else t._base
        if id(base) not in made:
            made[id(base)] = make_base(base)
        new = made[id(base)]
        rebuilt.append(new if t is base else new.as_strided(t.size(), t.stride(), t.storage_offset()))
    return tuple(rebuilt)


def fresh_input(x):
    """A new leaf copy of ``x`` that requires grad exactly when ``x`` does (of a tuple: its views of one another
    kept)."""
    return rebuilt_input(x, lambda t: t.detach().clone().requires_grad_(t.requires_grad))


def cast_input(x, dtype):
    """`fresh_input` of ``x``'s floating-point tensors in ``dtype`` (integer ones as they are)."""
    return rebuilt_input(
        x, lambda t: t.detach().to(dtype).clone().requires_grad_(t.requires_grad) if t.is_floating_point() else t
    )


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
    output = call_on(fn, x)
    after_forward = mutable_state(net, x, AFTER_FORWARD)
    if isinstance(x, tuple):  # (whether the output requires grad is state too: eager's backward needs it to)
        after_forward["output requires grad" + AFTER_FORWARD] = _flag(output.requires_grad)
    output.backward(cotangent)
    return output.detach(), gradients_and_state(net, x, after_forward)


def gradients_and_state(net, x, after_forward: dict) -> dict:
    """After backward: the gradients of ``x`` and of ``net``'s parameters by name, with ``after_forward`` (the
    `mutable_state` after forward) and the state after backward (`forward_backward`'s mapping)."""
    # (An input a program updated in place from a value that requires grad is no leaf any more: no .grad of its own.)
    grads = {name: t.grad if t.is_leaf else None for name, t in zip(input_names(x), input_tensors(x), strict=True)}
    grads.update((name.replace(_WRAPPED, ""), p.grad) for name, p in net.named_parameters())
    return {**grads, **after_forward, **mutable_state(net, x, AFTER_BACKWARD)}


def float64_reference(net, x, cotangent, training=None):
    """``forward_backward`` of a float64 copy of ``net`` on float64 copies of ``x``, ``cotangent`` and ``training``
    (each step from the same start as the example's, in float64)."""
    net = copy.deepcopy(net).double()
    return forward_backward(
        net, net, cast_input(x, torch.float64), cotangent.double(), training and training.to(torch.float64)
    )


def nudged_runs(net, x, cotangent, runs=NUDGES, training=None):
    """Eager on ``runs`` copies of ``net`` and ``x`` whose floating-point values are moved by up to `NUDGE_ULPS`
    ulps at random: where an element jumps, eager sits at a discontinuity. Each run is a pair of a sample of eager
    and its truth, so that eager's own error and drift can be seen over several samples, not one (rules 1 and 3):
    the copy's `forward_backward` and its `float64_reference`; for a float64 network, which has no wider truth,
    the copy's float64 run as the truth and, as the sample, that run moved by its float32 twin's error scaled down by
    the ratio of the epsilons (rounding errors scale with eps; the coarsest dtype the run computes in is its eps),
    or the run itself where no float32 twin runs (the truths still show eager's float64 spread,
    `fuzz.judge.tolerance.mismatch`).
    With ``training``, each copy trains along its own eager trajectory, its later steps' inputs nudged too."""
    generator = torch.Generator().manual_seed(0)

    def nudge(t):
        if not t.is_floating_point():
            return t
        noise = torch.rand(t.shape, generator=generator, dtype=torch.float64) * 2 - 1
        return t * (1 + NUDGE_ULPS * torch.finfo(t.dtype).eps * noise).to(t.dtype).to(t.device)

    results, computed = [], _ComputedDtypes()  # (the dtypes are the network's, the same for every copy: watched once)
    for _ in range(runs):
        nudged = copy.deepcopy(net)
        with torch.no_grad():
            for parameter in nudged.parameters():
                parameter.copy_(nudge(parameter))
        nudged_x = rebuilt_input(x, lambda t: nudge(t.detach()).requires_grad_(t.requires_grad))
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
            with contextlib.nullcontext() if results else computed:
                run = forward_backward(nudged, nudged, nudged_x, cotangent, steps)
            results.append(_float64_rounding_sample(run, twin, computed.dtypes))
    return results


class _ComputedDtypes(TorchDispatchMode):
    """The floating-point dtypes the ops run while it is active compute in: a float64 network may compute in float32
    inside (transformers' eager attention takes its softmax in float32), and round as coarsely as float32 there."""

    def __init__(self):
        super().__init__()
        self.dtypes = set()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        result = func(*args, **(kwargs or {}))
        # (An op on floating-point data rounds; a factory, an empty placeholder (layer_norm's, float32) does not.)
        if any(_values(t) for t in tree_leaves((args, kwargs))):
            self.dtypes.update(t.dtype for t in tree_leaves(result) if _values(t))
        return result


def _float32_twin(net, x, cotangent, training=None):
    """`forward_backward` of float32 copies of a float64 example; None where the network pins a dtype or the twin
    is not finite (no evidence of float64's rounding then)."""
    net = copy.deepcopy(net).float()
    training = training and training.to(torch.float32)
    try:
        twin = forward_backward(net, net, cast_input(x, torch.float32), cotangent.float(), training)
    except Exception:  # the network pins a dtype (an op's literal argument)
        return None
    return twin if finite(twin) else None


def finite(result):
    """Whether a `forward_backward` result's output and every tensor beside it are finite."""
    output, grads = result
    return all(bool(torch.isfinite(t).all()) for t in (output, *grads.values()) if t is not None)


def _values(t):
    """Whether ``t`` is a tensor of floating-point values (not an empty one)."""
    return isinstance(t, torch.Tensor) and t.is_floating_point() and t.numel() > 0


def _float64_rounding_sample(run, twin, dtypes):
    """(``run`` moved by its float32 ``twin``'s error x eps/eps32, ``run``), or (``run``, ``run``) without a twin;
    eps is the coarsest of the ``dtypes`` the float64 ``run`` computed in (`_ComputedDtypes`), float64's or, where it
    computes in float32 somewhere, float32's: its rounding there is the twin's, not scaled down."""
    if twin is None:
        return run, run
    eps = max((torch.finfo(dtype).eps for dtype in dtypes), default=torch.finfo(torch.float64).eps)
    ratio = min(1.0, eps / torch.finfo(torch.float32).eps)

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
    return net, cast_input(x, dtype), cotangent.to(dtype), training and training.to(dtype)
