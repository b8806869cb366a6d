"""Faults injected into thunder to prove the harness catches them (also usable as a pytest plugin).

Most faults replace the thunder op that `_checkpoint_function_converter` substitutes for one torch
op. That mapping is used only inside checkpointed functions, so those faults appear only there;
`PATCHES` replace a function of thunder's own instead, where their docstrings say.
As a plugin (`-p tests.faults`), the fault named by $FUZZ_INJECT_FAULT is installed in the pytest
processes of the run only; tests/fault_site also installs it in every other Python process (a repro.py).
"""

from __future__ import annotations

import contextlib
import operator
import os
import re
import signal
import time
from collections.abc import Callable, Iterator

import thunder.core.jit_ext
import thunder.dynamo.compiler
import thunder.dynamo.splitter
import thunder.torch
import thunder.transforms.autodiff
import torch
import torch.nn.functional as F
from thunder.dynamo.utils import _torch_to_thunder_function_map
from thunder.torch.langctx import _method_name_to_fn_map

# Adding then subtracting a huge constant rounds to exactly zero in the forward (any float
# dtype) but has derivative 1, so `y + (k - 1) * ((y + C) - C)` keeps y's value and scales its
# gradient by k.
_HUGE = 2.0**100


def scaled_gradient(op, factor: float, signed: bool = False):
    def faulty(*args, **kwargs):
        result = op(*args, **kwargs)
        y = result[0] if isinstance(result, tuple) else result  # max(dim): (values, indices)
        if not thunder.core.dtypes.is_float_dtype(getattr(y, "dtype", None)):  # (an index, a shape: no gradient)
            return result
        change = (factor - 1.0) * (thunder.torch.sign(args[0]) if signed else 1.0)
        y = y + change * (y - thunder.torch.detach(y))  # _HUGE overflows float16
        return (y, *result[1:]) if isinstance(result, tuple) else y

    faulty.__name__ = f"faulty_{getattr(op, '__name__', 'op')}"
    return faulty


def scaled_gradient_in(op, factor: float, dtypes: tuple[str, ...] = ("bfloat16", "float16"), signed: bool = False):
    """``op`` whose gradient is scaled by ``factor`` only in ``dtypes`` (by default the low-precision ones: thunderfx
    is then right one precision up, as with a bug in a low-precision kernel, what an accuracy gap must not swallow).
    ``signed``: by ``factor`` where the op's input is positive and by ``2 - factor`` where it is negative, an error
    of |factor - 1| that leaves the gradient's least-squares scale about right (elementwise, not systematic)."""
    scaled = scaled_gradient(op, factor, signed)

    def faulty(a, *args, **kwargs):
        return (scaled if str(a.dtype).rpartition(".")[2].rstrip("_") in dtypes else op)(a, *args, **kwargs)

    faulty.__name__ = f"faulty_{getattr(op, '__name__', 'op')}"
    return faulty


def _gradient_x2_where(fires: Callable[..., bool]):
    """A fault maker: the op whose gradient is doubled on the calls ``fires`` (given the op's arguments) says."""

    def make_faulty(op):
        scaled = scaled_gradient(op, 2.0)
        return lambda *args, **kwargs: (scaled if fires(*args, **kwargs) else op)(*args, **kwargs)

    return make_faulty


def _non_last_dim(a, *args, **kwargs) -> bool:
    """softmax reducing over a dim other than the last (no OpInfo sample does)."""
    dim, rank = kwargs.get("dim", args[0] if args else -1), max(a.ndim, 1)
    return dim % rank != rank - 1


def _zero_dim(a, *args, **kwargs) -> bool:
    """A 0-dim input (no OpInfo sample of sigmoid is 0-dim)."""
    return a.ndim == 0


def _without_weight(a, normalized_shape, weight=None, *args, **kwargs) -> bool:
    """layer_norm without a weight (every OpInfo sample passes one)."""
    return weight is None


def _mixed_dtypes(a, b, *args, **kwargs) -> bool:
    """A binary op of two tensors of different dtypes (no OpInfo sample mixes them)."""
    return isinstance(b, thunder.core.proxies.TensorProxy) and b.dtype != a.dtype


def softmax_of_a_non_contiguous_tensor(*args, **kwargs):
    """torch.softmax: what `_non_contiguous_softmax_faulty` retargets a checkpoint's softmax of a non-contiguous
    tensor to, so that thunder's converter maps it to the faulty softmax."""
    return torch.softmax(*args, **kwargs)


def _non_contiguous_softmax_faulty(checkpoint_converter):
    """thunderfx's preparation of each region it hands to thunder, where every torch.softmax inside a checkpoint
    whose input is not contiguous (its FX example value's strides: thunder's proxies have none, so the fault acts
    before the converter maps torch ops to thunder's) gets thunder's softmax with its gradient doubled."""
    _torch_to_thunder_function_map[softmax_of_a_non_contiguous_tensor] = scaled_gradient(thunder.torch.softmax, 2.0)

    def faulty(gm, region):
        for node in region.graph.nodes:
            if node.op == "call_function" and node.target is torch.ops.higher_order.tag_activation_checkpoint:
                body = node.args[0]
                owner = body.graph.owning_module if body.op == "get_attr" else gm
                for inner in getattr(owner, body.target if body.op == "get_attr" else body.name).graph.nodes:
                    value = inner.args[0].meta.get("example_value") if inner.target is torch.softmax else None
                    if isinstance(value, torch.Tensor) and not value.is_contiguous():
                        inner.target = softmax_of_a_non_contiguous_tensor
        checkpoint_converter(gm, region)

    return faulty


def _slope_gradient_x2(op):
    """leaky_relu whose gradient is doubled when it is called with a non-default negative_slope."""

    def faulty(a, negative_slope=0.01, inplace=False):
        y = op(a, negative_slope, inplace)
        return y if negative_slope == 0.01 else y + ((y + _HUGE) - _HUGE)

    return faulty


def busy(seconds: float) -> None:
    """Run Python for ``seconds``: a hung compile that the per-example alarm can interrupt."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        pass


def _segfault() -> None:
    os.kill(os.getpid(), signal.SIGSEGV)


def _hang() -> None:
    # The per-example alarm can no longer interrupt it, as in a hang inside native code.
    signal.signal(signal.SIGALRM, signal.SIG_IGN)
    time.sleep(3600)


def _once(op, disaster: Callable[[], None]):
    """``op``, except that the first call of the whole campaign (all processes) meets ``disaster``.

    "First" is marked by the file $FUZZ_FAULT_MARKER, so the worker xdist starts next runs normally. The file is
    created atomically (O_EXCL): both workers start with Hypothesis's simplest network, so both call ``op`` for the
    first time at nearly the same moment, and a check-then-create let both meet the disaster (a flaky self-test).
    """

    def faulty(*args, **kwargs):
        try:
            os.close(os.open(os.environ["FUZZ_FAULT_MARKER"], os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        except FileExistsError:
            return op(*args, **kwargs)
        disaster()
        return op(*args, **kwargs)

    faulty.__name__ = f"faulty_{getattr(op, '__name__', 'op')}"
    return faulty


def _dilation_gradient_x2(op):
    """A convolution whose gradients are doubled when it is called with a dilation other than 1."""

    def faulty(*args, **kwargs):
        y = op(*args, **kwargs)
        dilation = kwargs.get("dilation", args[5] if len(args) > 5 else 1)
        dilated = any(d != 1 for d in (dilation if isinstance(dilation, (tuple, list)) else (dilation,)))
        return y + ((y + _HUGE) - _HUGE) if dilated else y

    faulty.__name__ = f"faulty_{getattr(op, '__name__', 'op')}"
    return faulty


_VIEW_METHODS = frozenset({"select", "view", "reshape", "transpose", "narrow", "diagonal", "unsqueeze"})


def _is_view(node: object) -> bool:
    """Whether an FX argument is made by a view op (a method, or indexing)."""
    if not isinstance(node, torch.fx.Node):
        return False
    return (node.op == "call_method" and node.target in _VIEW_METHODS) or (
        node.op == "call_function" and node.target is operator.getitem
    )


def _view_updates_faulty(checkpoint_converter):
    """thunderfx's preparation of each region it hands to thunder (`checkpoint_converter` is called on every one),
    followed by a fault in the region's in-place updates through views: each is applied twice (a functionalization
    that replays an update), so the update shows twice in the output (not for an idempotent one: copy_, relu_).

    Not inside checkpoints, unlike the other faults: thunder 0.2.6 compiles no in-place update through a view
    inside a checkpoint at all (known issue inplace-view-in-checkpoint-crash; narrow regions fall back to
    inductor), while outside checkpoints it gets ``y[0].add_(0.5)`` right: that is where a fault can show. (A
    doubled gradient cannot show there either: thunder drops the gradient of every such update whose derivative
    is not 1, known issue inplace-view-grad-dropped.)"""

    def faulty(gm, region):
        checkpoint_converter(gm, region)
        graph = region.graph
        for node in list(graph.nodes):
            if node.op == "call_method" and node.target.endswith("_") and node.args and _is_view(node.args[0]):
                with graph.inserting_before(node.next):
                    graph.call_method(node.target, node.args, node.kwargs)
        region.recompile()

    return faulty


def _checkpoints(graph: torch.fx.Graph) -> list[torch.fx.Node]:
    return [
        node
        for node in graph.nodes
        if node.op == "call_function" and node.target is torch.ops.higher_order.tag_activation_checkpoint
    ]


def _aliased_checkpoint_inputs_faulty(checkpoint_converter):
    """thunderfx's preparation of each region it hands to thunder, followed by a fault in every checkpoint that takes
    two tensors sharing memory (their FX example values alias: a tensor and its view, two views): the first of them
    is scaled by 1.5, as a region split that copies one of two aliased inputs would get it wrong."""

    def faulty(gm, region):
        checkpoint_converter(gm, region)
        for node in _checkpoints(region.graph):
            tensors = {
                arg: arg.meta["example_value"]
                for arg in node.args[1:]
                if isinstance(arg, torch.fx.Node) and isinstance(arg.meta.get("example_value"), torch.Tensor)
            }
            values = list(tensors.values())
            aliased = [
                a
                for i, (a, v) in enumerate(tensors.items())
                if any(torch._C._is_alias_of(v, w) for w in values[i + 1 :])
            ]
            if aliased:
                with region.graph.inserting_before(node):
                    scaled = region.graph.call_function(operator.mul, (aliased[0], 1.5))
                node.args = (node.args[0], *(scaled if arg is aliased[0] else arg for arg in node.args[1:]))
        region.recompile()

    return faulty


def _is_update(node: torch.fx.Node) -> bool:
    return node.op == "call_method" and node.target.endswith("_") and not node.target.startswith("__")


def _clone_update_leaks_faulty(checkpoint_converter):
    """thunderfx's preparation of each region it hands to thunder, followed by a fault, inside checkpoints and out:
    after an in-place update of a clone (or of a view of it), every later read of the tensor it was cloned from
    (a checkpoint's argument and the graph's output too) reads the clone instead, as a functionalization that takes
    the clone for the original would."""

    def faulty(gm, region):
        checkpoint_converter(gm, region)
        _leak_through_checkpoints(region, dict(zip(_checkpoints(region.graph), _graphs(gm, region)[1:], strict=True)))
        for module in _graphs(gm, region):
            nodes = list(module.graph.nodes)
            for node in nodes:
                if _is_clone(node) and isinstance(node.args[0], torch.fx.Node) and (update := _update_of(node)):
                    _read_instead(nodes, node.args[0], node, after=update)
            module.recompile()

    return faulty


def _is_clone(node: torch.fx.Node) -> bool:
    return (node.op == "call_method" and node.target == "clone") or node.target is torch.clone


def _update_of(node: torch.fx.Node) -> torch.fx.Node | None:
    """The first in-place update of ``node`` or of a view of it, in its graph."""
    aliases = {node}
    for later in node.graph.nodes:
        if later.args and later.args[0] in aliases and (_is_view(later) or _is_update(later)):
            if _is_update(later):
                return later
            aliases.add(later)
    return None


def _read_instead(nodes: list[torch.fx.Node], original: torch.fx.Node, clone: torch.fx.Node, after: torch.fx.Node):
    """Every read of ``original`` after node ``after`` reads ``clone``."""
    for reader in nodes[nodes.index(after) + 1 :]:
        reader.args = torch.fx.map_arg(reader.args, lambda arg: clone if arg is original else arg)


def _leak_through_checkpoints(region: torch.fx.GraphModule, bodies: dict[torch.fx.Node, torch.fx.GraphModule]):
    """The clone-update fault across a checkpoint's boundary: a clone the body updates (the region's clone passed in,
    or the body's clone of an argument, returned) stands for its original in what the region reads after it."""
    nodes = list(region.graph.nodes)
    for ckpt, body in bodies.items():
        placeholders = [node for node in body.graph.nodes if node.op == "placeholder"]
        (returned,) = [node.args[0] for node in body.graph.nodes if node.op == "output"]
        returned = list(returned) if isinstance(returned, (tuple, list)) else [returned]
        taken = {user.args[1]: user for user in ckpt.users if user.target is operator.getitem}
        for placeholder, arg in zip(placeholders, ckpt.args[1:], strict=False):
            if not isinstance(arg, torch.fx.Node):
                continue
            if _is_clone(arg) and _update_of(placeholder):
                _read_instead(nodes, arg.args[0], arg, after=ckpt)
            for clone in [user for user in placeholder.users if _is_clone(user)]:
                if (update := _update_of(clone)) is not None and {clone, update} & set(returned):
                    position = returned.index(clone if clone in returned else update)
                    value = taken.get(position, ckpt if len(returned) == 1 else None)
                    if value is not None:
                        _read_instead(nodes, arg, value, after=value)


# The data-flow updates programs had before the op catalog's: the fault below leaves them alone.
_FIRST_UPDATES = frozenset({"add_", "mul_", "sigmoid_"})


def _graphs(gm: torch.fx.GraphModule, region: torch.fx.GraphModule) -> list[torch.fx.GraphModule]:
    """``region`` and the body of each checkpoint in it."""
    bodies = [node.args[0] for node in _checkpoints(region.graph)]
    return [region, *(getattr(region, b.target) if b.op == "get_attr" else getattr(gm, b.name) for b in bodies)]


def _catalog_updates_lost_faulty(checkpoint_converter):
    """thunderfx's preparation of each region it hands to thunder, followed by a fault: every in-place update by a
    method other than add_, mul_ and sigmoid_ (the op catalog's: ``tanh_``, ``sin_``, ``exp_``, ...) computes its
    value out of place, its receiver left as it was, inside checkpoints and out: a later read of the updated tensor
    (or of its base) reads the value before the update, as a functionalization that misses that op's update would."""

    def faulty(gm, region):
        checkpoint_converter(gm, region)
        for module in _graphs(gm, region):
            for node in module.graph.nodes:
                if _is_update(node) and node.target not in _FIRST_UPDATES and hasattr(torch.Tensor, node.target[:-1]):
                    node.target = node.target[:-1]
            module.recompile()

    return faulty


def _no_grad_regions_tracked_faulty(checkpoint_converter):
    """thunderfx's preparation of each region it hands to thunder, followed by a fault: every switch of grad mode
    (``torch._C._set_grad_enabled``, what dynamo makes of ``with torch.no_grad()``) is dropped, inside checkpoints
    and out, so a no_grad region's values are tracked for grad as if it were not there."""

    def faulty(gm, region):
        checkpoint_converter(gm, region)
        for module in _graphs(gm, region):
            for node in list(module.graph.nodes):
                switch = node.target is torch._C._set_grad_enabled or (  # (the converter's thunder symbol for it)
                    getattr(node.target, "name", None) == "_set_grad_enabled_with_warning"
                )
                if node.op == "call_function" and switch and not node.users:
                    module.graph.erase_node(node)
            module.recompile()

    return faulty


def _autocast_in_bodies_ignored_faulty(checkpoint_converter):
    """thunderfx's preparation of each region it hands to thunder, followed by a fault: inside checkpoint bodies,
    every autocast switch (what dynamo makes of ``with torch.autocast``, which the converter turns into thunder's
    ``autocast_enter`` / ``autocast_exit``) is dropped, so a body's autocast region computes in the network's dtype.
    Outside checkpoints autocast holds."""

    def faulty(gm, region):
        checkpoint_converter(gm, region)
        switches = ("autocast_enter", "autocast_exit")  # (the converter's thunder symbols for them)
        for module in _graphs(gm, region)[1:]:
            for node in list(reversed(module.graph.nodes)):  # an exit before the enter it uses
                if node.op == "call_function" and getattr(node.target, "name", None) in switches:
                    module.graph.erase_node(node)
            module.recompile()

    return faulty


class _StaleParameters(torch.nn.Module):
    """A region thunder compiled that, from its second call on, computes with the parameter values of its first call
    (their gradients still flow): a compiled function that keeps stale state between training steps."""

    def __init__(self, compiled):
        super().__init__()
        self.compiled, self.first = compiled, None
        self._lc_cs = compiled._lc_cs  # still thunder's compiled function to `thunder.last_traces` (the memory rule)

    def forward(self, *args):
        if self.first is None:
            self.first = [a.detach().clone() if isinstance(a, torch.nn.Parameter) else None for a in args]
        else:
            args = [a if f is None else a + (f - a).detach() for a, f in zip(args, self.first, strict=True)]
        return self.compiled(*args)


def _stale_parameters_faulty(splitter):
    """thunderfx's splitter, each region it has thunder compile wrapped in `_StaleParameters`."""

    def faulty(gm, thunder_jit, *args, **kwargs):
        return splitter(gm, lambda *a, **k: _StaleParameters(thunder_jit(*a, **k)), *args, **kwargs)

    return faulty


class _ArgumentsFault(torch.nn.Module):
    """A region thunder compiled, with a fault in how it takes the network's arguments: ``fault(compiled, args,
    further, inputs)`` calls it, ``further`` the positions of the network's further arguments (a program's ``v1``,
    ``v3``...: placeholders dynamo names ``l_v1_``...), ``inputs`` those of every network argument (``x`` too)."""

    def __init__(self, compiled, region: torch.fx.GraphModule, fault: Callable):
        super().__init__()
        self.compiled, self.fault = compiled, fault
        self._lc_cs = compiled._lc_cs  # still thunder's compiled function to `thunder.last_traces` (the memory rule)
        placeholders = [node.name for node in region.graph.nodes if node.op == "placeholder"]
        self.further = [i for i, name in enumerate(placeholders) if re.fullmatch(r"l_v[1-9]\d*_", name)]
        self.inputs = [i for i, name in enumerate(placeholders) if re.fullmatch(r"l_x_|l_v[1-9]\d*_", name)]

    def forward(self, *args):
        return self.fault(self.compiled, list(args), self.further, self.inputs)


def _further_inputs_lose_grad(compiled, args, further, inputs):
    """Each further argument that requires grad taken as one that does not (its gradient lost)."""
    return compiled(*(a.detach() if i in further else a for i, a in enumerate(args)))


def _aliased_inputs_scaled(compiled, args, further, inputs):
    """Each further argument sharing memory with another network argument read as 1.5 times its values (as if it were
    a copy, one that a wrong update made); ``x`` and a region's other arguments (values an earlier region made) as they
    are."""
    storages = {i: args[i].untyped_storage().data_ptr() for i in inputs}
    shared = [i for i in further if any(storages[i] == storages[j] for j in inputs if j != i)]
    return compiled(*(a * 1.5 if i in shared else a for i, a in enumerate(args)))


def _input_updates_lost(compiled, args, further, inputs):
    """Each further argument that needs no grad left as it was before the call: thunder's in-place updates of the
    network's inputs not written back to them (the values computed from the updates are still right)."""
    before = {i: args[i].detach().clone() for i in further if not args[i].requires_grad}
    result = compiled(*args)
    with torch.no_grad():
        for i, values in before.items():
            args[i].copy_(values)
    return result


def _arguments_faulty(fault: Callable):
    """thunderfx's splitter, each region it has thunder compile wrapped in `_ArgumentsFault` with ``fault``."""

    def make(splitter):
        def faulty(gm, thunder_jit, *args, **kwargs):
            return splitter(gm, lambda region, *a, **k: _ArgumentsFault(thunder_jit(region, *a, **k), region, fault),
                            *args, **kwargs)  # fmt: skip

        return faulty

    return make


def _checkpoints_dropped_faulty(checkpoint_converter):
    """thunderfx's preparation of each region it hands to thunder, followed by a fault: every checkpoint is replaced
    by a plain call of its body, as a region that silently stopped being checkpointed (the same values and
    gradients; its intermediates are saved for backward instead of recomputed)."""

    def faulty(gm, region):
        checkpoint_converter(gm, region)
        for node in _checkpoints(region.graph):
            body = node.args[0]
            if body.op != "get_attr":
                region.add_submodule(body.name, getattr(gm, body.name))
            with region.graph.inserting_before(node):
                call = region.graph.call_module(body.target if body.op == "get_attr" else body.name, node.args[1:])
            node.replace_all_uses_with(call)
            region.graph.erase_node(node)
        region.recompile()

    return faulty


def _converted_nodes_faulty(checkpoint_converter):
    """thunderfx's preparation of each region it hands to thunder, followed by a converter-wide fault: every node the
    checkpoint converter replaced by a thunder op has its gradient scaled by 1.01 (its value right), as one wrong
    decision of the converter for each node it touches would be (the seed's mechanism: each replaced node's ``meta``
    dropped). Inside checkpoints only, in whatever op: no op is to blame."""

    def faulty(gm, region):
        checkpoint_converter(gm, region)
        for node in _checkpoints(region.graph):
            body = node.args[0]
            module = getattr(region, body.target) if body.op == "get_attr" else getattr(gm, body.name)
            for inner in module.graph.nodes:
                converted = inner.op == "call_function" and inner.target.__module__ not in ("_operator", "builtins")
                if converted and not inner.target.__name__.startswith("faulty_"):
                    inner.target = scaled_gradient(inner.target, 1.01)
            module.recompile()

    return faulty


def _every_second_checkpoint_not_recomputed(grad_transform_on_trace):
    """thunder's grad transform, given each trace with its second, fourth, ... checkpoint replaced by the region's
    ops: those regions are no longer checkpointed (their intermediates saved for backward; the same values and
    gradients), the others are."""
    from thunder.core.trace import from_trace

    def faulty(trace, *args, **kwargs):
        inlined = from_trace(trace)
        checkpoints = 0
        for bsym in trace.bound_symbols:
            if bsym.sym.id == "activation_checkpoint":
                checkpoints += 1
                if checkpoints % 2 == 0:
                    inlined.bound_symbols += bsym.subsymbols
                    continue
            inlined.bound_symbols.append(bsym)
        return grad_transform_on_trace(inlined, *args, **kwargs)

    return faulty


FAULTS = {
    "tanh-grad-x2": (torch.tanh, lambda op: scaled_gradient(op, 2.0)),
    "tanh-grad-x1.001": (torch.tanh, lambda op: scaled_gradient(op, 1.001)),
    "tanh-grad-x1.01": (torch.tanh, lambda op: scaled_gradient(op, 1.01)),
    # Low precision only (right in float32): 30% off, as a bfloat16 kernel bug would be.
    "softmax-low-precision-grad-x0.7": (torch.softmax, lambda op: scaled_gradient_in(op, 0.7)),
    # Only networks with dropout: thunder's gradient through its mask, inside checkpoints. (On CPU every dropout in a
    # compiled checkpoint is already wrong, known issue dropout-in-checkpoint-fresh-mask, whose error is at most
    # about the gradient's scale: x8 is beyond its band, as a new bug there must be to show.)
    "dropout-grad-x8": (F.dropout, lambda op: scaled_gradient(op, 8.0)),
    # Only networks with attention (the decoder family's blocks, attention, transformer_block).
    "sdpa-grad-x2": (F.scaled_dot_product_attention, lambda op: scaled_gradient(op, 2.0)),
    # Only one argument of one op of the op family: leaky_relu with a non-default negative_slope.
    "leaky-relu-slope-grad-x2": (F.leaky_relu, _slope_gradient_x2),
    # Only an argument value no sample of its op has: torch.softmax over a dim other than the last.
    "softmax-non-last-dim-grad-x2": (torch.softmax, _gradient_x2_where(_non_last_dim)),
    "sigmoid-zero-dim-grad-x2": (torch.sigmoid, _gradient_x2_where(_zero_dim)),
    # Only an optional argument left out where every sample passes it: layer_norm without a weight.
    "layer-norm-without-weight-grad-x2": (F.layer_norm, _gradient_x2_where(_without_weight)),
    # Only a partner of another dtype (type promotion): torch.div of a float32 and a float64 or bfloat16 tensor.
    "div-mixed-dtype-grad-x2": (torch.div, _gradient_x2_where(_mixed_dtypes)),
    # Process-level failures, once per campaign (needs $FUZZ_FAULT_MARKER).
    "tanh-segfault-once": (torch.tanh, lambda op: _once(op, _segfault)),
    "tanh-hang-once": (torch.tanh, lambda op: _once(op, _hang)),
    # Only one argument of the convolutions: a dilation other than 1.
    **{
        f"conv-dilation-grad-x2-{conv.__name__}": (conv, _dilation_gradient_x2)
        for conv in (torch.conv1d, torch.conv2d, torch.conv3d)
    },
}
# Faults in thunder's own functions: (module, attribute, faulty version of it).
PATCHES = {
    "inplace-view-update-twice": (thunder.dynamo.splitter, "checkpoint_converter", _view_updates_faulty),
    # Only a layout no sample has: torch.softmax of a transposed, strided or expanded tensor.
    "softmax-non-contiguous-grad-x2": (thunder.dynamo.splitter, "checkpoint_converter", _non_contiguous_softmax_faulty),
    # Only a checkpoint that takes two aliased tensors (a program's region on a tensor and its view).
    "checkpoint-aliased-inputs-x1.5": (
        thunder.dynamo.splitter,
        "checkpoint_converter",
        _aliased_checkpoint_inputs_faulty,
    ),
    # Only a read of a tensor after an in-place update of its clone (a program's data flow).
    "clone-update-leaks-to-original": (thunder.dynamo.splitter, "checkpoint_converter", _clone_update_leaks_faulty),
    # Only an in-place update by one of the op catalog's methods (a program's update_op nodes), inside or out.
    "catalog-updates-lost": (thunder.dynamo.splitter, "checkpoint_converter", _catalog_updates_lost_faulty),
    # Only a program's no_grad region (a layer under grad_mode no_grad), inside checkpoints or out.
    "no-grad-regions-tracked": (thunder.dynamo.splitter, "checkpoint_converter", _no_grad_regions_tracked_faulty),
    # Only an autocast region inside a checkpoint's body.
    "autocast-in-bodies-ignored": (thunder.dynamo.splitter, "checkpoint_converter", _autocast_in_bodies_ignored_faulty),
    # Only from a compiled function's second call on: training steps (one forward and backward never calls it twice).
    "stale-parameters-from-second-step": (thunder.dynamo.compiler, "_splitter", _stale_parameters_faulty),
    # Only a network of several inputs (a program's further inputs), one each: an input that requires grad, inputs
    # sharing memory, an input updated in place.
    "further-inputs-lose-grad": (thunder.dynamo.compiler, "_splitter", _arguments_faulty(_further_inputs_lose_grad)),
    "aliased-inputs-x1.5": (thunder.dynamo.compiler, "_splitter", _arguments_faulty(_aliased_inputs_scaled)),
    "input-updates-lost": (thunder.dynamo.compiler, "_splitter", _arguments_faulty(_input_updates_lost)),
    # Only the memory contract: the values and gradients are right, each region's intermediates saved for backward.
    "checkpoints-dropped": (thunder.dynamo.splitter, "checkpoint_converter", _checkpoints_dropped_faulty),
    # Converter-wide: every op inside checkpoints, in no op (a stand-in in its place fails alike).
    "converted-nodes-grad-x1.01": (thunder.dynamo.splitter, "checkpoint_converter", _converted_nodes_faulty),
    # Only the memory contract, and only networks with two or more regions in one compiled graph.
    "every-second-checkpoint-not-recomputed": (
        thunder.transforms.autodiff,
        "grad_transform_on_trace",
        _every_second_checkpoint_not_recomputed,
    ),
}
# Faults made of several entries of FAULTS.
GROUPS = {"conv-dilation-grad-x2": [name for name in FAULTS if name.startswith("conv-dilation-grad-x2-")]}


def install(name: str) -> Callable[[], None]:
    """Inject fault ``name`` into thunder (see the module docstring for where it acts); returns the undo."""
    if name in GROUPS:
        undos = [install(part) for part in GROUPS[name]]
        return lambda: [undo() for undo in undos]
    if name in PATCHES:
        module, attribute, make_faulty = PATCHES[name]
        original = getattr(module, attribute)
        setattr(module, attribute, make_faulty(original))
        return lambda: setattr(module, attribute, original)
    torch_op, make_faulty = FAULTS[name]
    original = _torch_to_thunder_function_map[torch_op]
    _torch_to_thunder_function_map[torch_op] = make_faulty(original)
    return lambda: _torch_to_thunder_function_map.__setitem__(torch_op, original)


@contextlib.contextmanager
def replaced(torch_op, make_faulty: Callable, everywhere: bool = False) -> Iterator[None]:
    """The thunder op that checkpointed ``torch_op`` calls replaced by ``make_faulty(original)`` within the block;
    ``everywhere``: also where thunder's jit meets ``torch_op`` outside checkpoints (its lookaside map is a wrapped
    copy of the converter's map, made when thunder is imported) and where a tensor's method is that op (``x.max``),
    so that the fault is no checkpoint's."""
    original = _torch_to_thunder_function_map[torch_op]
    faulty = make_faulty(original)
    jit_ext, methods = thunder.core.jit_ext, _method_name_to_fn_map
    saved = [(_torch_to_thunder_function_map, torch_op, original)]
    if everywhere:
        saved.append((jit_ext._general_jit_lookaside_map, torch_op, jit_ext._general_jit_lookaside_map[torch_op]))
        saved += [(methods, name, method) for name, method in methods.items() if method is original]
    for mapping, key, _ in saved:
        mapping[key] = faulty
    if everywhere:
        jit_ext._general_jit_lookaside_map[torch_op] = jit_ext.ensure_recursive_proxies(
            jit_ext.interpreter_needs_wrap(jit_ext.record_source_loc_in_symbol_header(faulty))
        )
    try:
        yield
    finally:
        for mapping, key, value in saved:
            mapping[key] = value


@contextlib.contextmanager
def injected(name: str) -> Iterator[None]:
    """Fault ``name`` injected within the block only."""
    undo = install(name)
    try:
        yield
    finally:
        undo()


def _broken_harness(spec):
    raise KeyError("a bug injected into the harness (tests/faults.py)")


_installed_from_environment: list[str] = []


def install_from_environment() -> None:
    """Install the fault $FUZZ_INJECT_FAULT names, once per process (see tests/fault_site)."""
    if (name := os.environ.get("FUZZ_INJECT_FAULT")) and not _installed_from_environment:
        install(name)
        _installed_from_environment.append(name)


def _pause(where: Callable, phase: str, after: bool = False) -> Callable:
    """``where``, except that its first call in the whole campaign (marked by the file $FUZZ_PAUSE_MARKER, which gets
    the pid of the process and the phase) waits up to 30 s, before (or ``after``) it runs, for the run to be
    stopped: a test then knows which process to signal, and that it is in ``phase``."""

    def wait_for_the_signal() -> None:
        try:
            marker = os.open(os.environ["FUZZ_PAUSE_MARKER"], os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:
            return
        os.write(marker, f"{os.getpid()} {phase}".encode())
        os.close(marker)
        from fuzz.run.stops import interrupted

        end = time.monotonic() + 30
        while time.monotonic() < end and not interrupted():  # (once signals only mark the run: the summary's phase)
            time.sleep(0.05)

    def paused(*args, **kwargs):
        if not after:
            wait_for_the_signal()
        result = where(*args, **kwargs)
        if after:
            wait_for_the_signal()
        return result

    return paused


def _install_pause(phase: str) -> None:
    """Make the campaign wait in ``phase`` (see `_pause`): generation (the first example), shrinking (once the first
    failure is written as unshrunk), reduction (of a shrunk failure), confirmation (its repro.py), summary."""
    import fuzz.campaign.engine
    import fuzz.campaign.findings

    if phase == "shrinking":
        original = fuzz.campaign.findings.FailureWriter._write_failure

        def write_failure(self, artifacts, spec, failure, name=None, reduced=False):
            written = _pause(original, phase, after=True) if artifacts.name == "unshrunk" else original
            return written(self, artifacts, spec, failure, name, reduced)

        fuzz.campaign.findings.FailureWriter._write_failure = write_failure
        return
    module, name = {
        "generation": (fuzz.campaign.engine, "check_spec"),
        "reduction": (fuzz.campaign.findings, "reduce_spec"),
        "confirmation": (fuzz.campaign.findings, "confirm"),
        "summary": (fuzz.campaign.engine, "build_summary"),
    }[phase]
    setattr(module, name, _pause(getattr(module, name), phase))


def _install_death_in_phase(phase: str) -> None:
    """Kill the process (SIGSEGV, once per campaign: $FUZZ_FAULT_MARKER) as the first network in flight enters
    ``phase`` of `fuzz.run.runner.in_phase`; "reduction": thunder's phase while a shrunk failure is reduced."""
    import fuzz.campaign.findings
    import fuzz.report.run_folder

    reducing = []
    if phase == "reduction":
        reduce_spec = fuzz.campaign.findings.reduce_spec

        def reducing_spec(*args, **kwargs):
            reducing.append(True)
            return reduce_spec(*args, **kwargs)

        fuzz.campaign.findings.reduce_spec = reducing_spec
    target = "thunder" if phase == "reduction" else phase
    mark_phase = fuzz.report.run_folder.RunFolder.mark_phase

    def marked(self, worker, now):
        mark_phase(self, worker, now)
        if now == target and self._running.get(worker) and (reducing or phase != "reduction"):
            _once(lambda: None, _segfault)()

    fuzz.report.run_folder.RunFolder.mark_phase = marked


def pytest_configure(config) -> None:
    install_from_environment()
    if phase := os.environ.get("FUZZ_DIE_IN_PHASE"):
        _install_death_in_phase(phase)
    if phase := os.environ.get("FUZZ_PAUSE_AT"):
        _install_pause(phase)
    if os.environ.get("FUZZ_INJECT_HARNESS_ERROR"):  # a bug of ours, not thunder's: on every example
        import fuzz.campaign.engine

        fuzz.campaign.engine.known_issues_for = _broken_harness
