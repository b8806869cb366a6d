"""Hypothesis strategies that draw valid programs (`fuzz.generate.program`): layers and data-flow kinds reading any
earlier values, checkpointed regions with several inputs and outputs, in-place updates where eager allows them.

Written to shrink toward a layer stack: each read toward the latest value, layers before data flow, one output.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from hypothesis import strategies as st

from fuzz.generate import axes, program
from fuzz.generate.catalog_flow import update_calls
from fuzz.generate.draws import (
    MAX_DIM,
    OP_KINDS,
    PLACEMENTS,
    checkpoint_options,
    checkpoints_from_placements,
    layer_specs,
    op_swarm,
    param_values,
    rarely,
)
from fuzz.generate.flow import VIEW_KINDS
from fuzz.generate.kind import Incoming, LayerKind
from fuzz.generate.layers import LAYER_KINDS
from fuzz.generate.op_catalog import OpCall
from fuzz.generate.spec import DTYPES, LayerSpec, NetSpec
from fuzz.generate.spec_parts import GRAD_MODES

MAX_NODES = 8
# The data-flow kinds a program draws (`fuzz.generate.flow`) by family, each family as likely: copies, views (the
# first three first: what a view shrinks to, then torch's other view ops), arithmetic on two values, in-place
# updates, in-place updates by the op catalog's calls (`fuzz.generate.catalog_flow`) and indexed updates
# (`fuzz.generate.flow.INDEXED_KINDS`; last: shrinking goes toward the first families).
FLOW_FAMILIES = (
    ("clone", "scale"),
    ("alias", "slice", "transpose", *(kind.name for kind in VIEW_KINDS)),
    ("add", "mul"),
    ("add_", "mul_", "sigmoid_"),
    ("update_op", "update_op2"),
    ("copy_", "slice_assign", "mask_assign", "rows_assign", "index_put_", "masked_fill_"),
)
# The vocabulary before the view ops, catalog and indexed updates (``catalog_nodes=False``): the first three of each
# of the first four families.
FIRST_FLOW_FAMILIES = tuple(family[:3] for family in FLOW_FAMILIES[:4])


def _earlier(draw: st.DrawFn, values: Sequence[int]) -> int:
    """One of ``values`` (value numbers, oldest first): the latest first, so a read shrinks toward a stack's."""
    return values[len(values) - 1 - draw(st.integers(0, len(values) - 1))]


def _partner(draw: st.DrawFn, kind: LayerKind, x: int, flowing: Sequence[program.Value]) -> int:
    """The second value a two-value kind reads beside ``x``: one of its shape (for an update, not overlapping it)."""
    partners = [v for v in range(len(flowing)) if flowing[v].shape == flowing[x].shape]
    if kind.flow.updates:  # eager rejects an update from an overlapping tensor (from itself too, if it saves them)
        partners = [v for v in partners if (v == x and not kind.flow.saves) or flowing[v].base != flowing[x].base]
        partners = partners or [x]  # (repaired into its out-of-place twin)
    # Aliases of x last, the likeliest: two views of one tensor entering a checkpoint, or an update.
    partners.sort(key=lambda v: v != x and flowing[v].base == flowing[x].base)
    needing = [v for v in partners if flowing[v].requires_grad]
    if not flowing[x].requires_grad and needing and len(needing) < len(partners):
        # x needs no grad (state): half the time from a value that needs grad (it gives x grad), else from one that
        # needs none, the simpler flow it shrinks to (a failure of the update alone then shows without that one's).
        partners = needing if draw(st.booleans()) else [v for v in partners if v not in needing]
    return _earlier(draw, partners)


def _drawable(kind: LayerKind, flowing: Sequence[Any], incoming: Incoming) -> tuple[LayerKind, list[int], list[Any]]:
    """A drawn data-flow ``kind`` as it can be drawn here, the values it may read first and its catalog calls: a view
    that needs a contiguous value an alias where none is; a catalog update with no call in this dtype today's update."""
    targets = list(range(len(flowing)))
    if kind.flow.needs_contiguous:
        contiguous = [v for v in targets if flowing[v].contiguous]
        kind, targets = (kind, contiguous) if contiguous else (LAYER_KINDS["alias"], targets)
    calls = [c for c in update_calls() if c.kind == kind.name and incoming.dtype in c.dtypes]
    if kind.flow.plain is not None and not calls:
        kind = LAYER_KINDS[kind.flow.plain]
    return kind, targets, calls


def _updatable_inputs(
    kind: LayerKind, layers: list[LayerSpec], placements: list[Any], flowing: Sequence[Any], incoming: Incoming
) -> list[int]:
    """The values of an input's memory a next update of ``kind`` may update: outside checkpoints (an input is made
    outside them), where the strategy sends half of its updates when there are some (state, as code updates a cache
    it is passed)."""
    inputs = {flowing[v].base for v in range(len(flowing)) if program.is_input(layers, v)}
    outside = checkpoints_from_placements([*placements, ("outside", None)], [*layers, LayerSpec(kind.name)])
    return [v for v in program.updatable(layers, outside, incoming, None) if flowing[v].base in inputs]


def _update_params(draw: st.DrawFn, calls: Sequence[Any]) -> dict[str, Any]:
    """The params of an update by one of the op catalog's ``calls``: half the time one literal argument axis varied
    (`fuzz.generate.axes`; shrinks to the sample call)."""
    call = draw(st.sampled_from(calls))
    if call.mutations and draw(st.booleans()):
        return axes.mutated(call.params, draw(st.sampled_from(call.mutations)))
    return call.params


def _update_targets(
    draw: st.DrawFn,
    kind: LayerKind,
    layers: list[LayerSpec],
    placements: list[Any],
    placement: Any,
    flowing: list[program.Value],
    incoming: Incoming,
) -> tuple[list[tuple[LayerSpec, Any]], list[int], Any, list[program.Value]]:
    """What an update of ``kind`` placed at ``placement`` may update: the layers it needs first (a view of an input,
    a fresh clone), the values (aliased ones last, the likeliest), its placement, and ``flowing`` with those layers."""
    ckpts = checkpoints_from_placements([*placements, placement], [*layers, LayerSpec(kind.name)])
    nodes: list[tuple[LayerSpec, Any]] = []
    targets = program.updatable(layers, ckpts, incoming, program.region_of(ckpts, len(layers)))
    if (of_inputs := _updatable_inputs(kind, layers, placements, flowing, incoming)) and draw(st.booleans()):
        placement, targets = ("outside", None), of_inputs
        if draw(st.booleans()):  # through a view the program makes of the input (else rare: a view, then this)
            view = LayerSpec("alias", reads=[_earlier(draw, targets)])
            with_view = program.values([*layers, view], ckpts, incoming)
            if len(with_view) - 1 in program.updatable([*layers, view], ckpts, incoming, None):
                nodes, targets, flowing = [(view, placement)], [len(flowing)], with_view
    # Values with aliases last, the likeliest: a second update of one tensor, through another view of it (of an
    # input: an aliased input, a view the program made of one).
    targets.sort(key=lambda v: sum(value.base == flowing[v].base for value in flowing))
    if not targets:  # nothing eager lets it update yet: a clone, updated
        clone = LayerSpec("clone", reads=[_earlier(draw, range(len(flowing)))])
        nodes, targets = [(clone, placement)], [len(flowing)]
        placement = ("outside" if placement[0] == "outside" else "inside", None)
        flowing = program.values([*layers, clone], ckpts, incoming)
    return nodes, targets, placement, flowing


@st.composite
def _program_nodes(
    draw: st.DrawFn,
    kinds: Sequence[LayerKind],
    placed: Sequence[tuple[LayerSpec, Any]],
    incoming: Incoming,
    max_dim: int,
    op_calls: Sequence[OpCall],
    catalog_nodes: bool = True,
) -> tuple[list[tuple[LayerSpec, Any]], bool]:
    """A program's next layers and their placements (as `fuzz.strategies` places a stack layer, drawn first), and if
    more follow: a layer of ``kinds`` (or an op call) on an earlier value, or a data-flow kind on one or two values;
    an update of a value eager lets it update, or else of a fresh clone of one (two layers)."""
    role = draw(st.sampled_from(PLACEMENTS))
    placement = (role, draw(checkpoint_options(MAX_NODES)) if role != "outside" else None)
    layers, placements = [layer for layer, _ in placed], [placement for _, placement in placed]
    flowing = program.values(layers, checkpoints_from_placements(placements, layers), incoming)
    every = range(len(flowing))
    if not draw(st.booleans()):
        x = _earlier(draw, every)
        if op_calls or any(kind.takes(flowing[x].shape) for kind in kinds):
            layer = replace(draw(layer_specs(kinds, flowing[x].shape, max_dim, op_calls)), reads=[x])
        else:  # nothing of ``kinds`` takes it: a copy
            layer = LayerSpec("clone", reads=[x])
        return [(layer, placement)], draw(st.integers(0, 3)) > 0
    families = FLOW_FAMILIES if catalog_nodes else FIRST_FLOW_FAMILIES
    kind = LAYER_KINDS[draw(st.sampled_from(draw(st.sampled_from(families))))]
    nodes: list[tuple[LayerSpec, Any]] = []
    kind, targets, calls = _drawable(kind, flowing, incoming)
    ckpts = checkpoints_from_placements([*placements, placement], [*layers, LayerSpec(kind.name)])
    if kind.flow.updates:
        nodes, targets, placement, flowing = _update_targets(
            draw, kind, layers, placements, placement, flowing, incoming
        )
    x = _earlier(draw, targets)
    aliases = [
        v for v in every if v != x and flowing[v].base == flowing[x].base and flowing[v].shape == flowing[x].shape
    ]
    if kind.flow.reads == 2 and not kind.flow.updates and role == "new" and not aliases and draw(st.integers(0, 3)):
        # A checkpoint opening on x and a view of x, made for it: two aliased inputs of one region (three times in
        # four: the rarest structure, 3% of programs at one in two; shrinks toward none).
        nodes.append((LayerSpec("alias", reads=[x]), ("outside", None)))
        flowing = program.values([*layers, nodes[-1][0]], ckpts, incoming)
    reads = [x] if kind.flow.reads == 1 else [x, _partner(draw, kind, x, flowing)]
    if kind.flow.plain is not None:
        params = _update_params(draw, calls)
    else:
        drawn = {p.name: draw(param_values(p, flowing[x].shape.width, max_dim)) for p in kind.params}
        params = dict(kind.fit(drawn, flowing[x].shape))
    nodes.append((LayerSpec(kind.name, params, reads=reads), placement))
    return nodes, draw(st.integers(0, 3)) > 0


@st.composite
def _further_inputs(draw: st.DrawFn, incoming: Incoming, max_dim: int) -> list[LayerSpec]:
    """A program's first layers, its further inputs (arguments, made before the call: `fuzz.generate.flow.INPUT_KINDS`),
    half the time: up to three, each a ``state_input`` of the first input's width or of its own, needing no grad (the
    simplest, state) or grad, or an ``input_view``, columns of an earlier input. Shrinks to none."""
    if not draw(st.booleans()):
        return []
    layers: list[LayerSpec] = []
    view = LAYER_KINDS["input_view"]
    for _ in range(draw(st.integers(1, 3))):
        made = program.values(layers, [], incoming)
        if layers and draw(st.booleans()):
            x = _earlier(draw, range(len(made)))
            drawn = {p.name: draw(param_values(p, made[x].shape.width, max_dim)) for p in view.params}
            layers.append(LayerSpec(view.name, dict(view.fit(drawn, made[x].shape)), reads=[x]))
            continue
        width = incoming.width if draw(st.booleans()) else draw(st.integers(1, max_dim))
        layers.append(LayerSpec("state_input", {"width": width, "requires_grad": draw(st.booleans())}, reads=[0]))
    return layers


def _grad_mode(draw: st.DrawFn, previous: str | None, dtype: str, grad_modes: Sequence[str]) -> str | None:
    """A node's grad mode, one of ``grad_modes``: its predecessor's half the time (a region goes on), else a new one
    about one time in six, else None (what it shrinks to); autocast in float32 networks only."""
    if previous is not None and draw(st.booleans()):
        return previous
    modes = [mode for mode in GRAD_MODES if mode in grad_modes and (mode != "autocast" or dtype == "float32")]
    return draw(st.sampled_from(modes)) if modes and rarely(draw) else None


def _outputs(draw: st.DrawFn, layers: list[LayerSpec], checkpoints: list[Any], incoming: Incoming) -> list[int]:
    """A program's outputs: its last value, every value nothing reads after it is made or after its memory's last
    in-place update, and up to two drawn others (shrinking toward none)."""
    # A layer whose value no one reads or returns runs but is never judged (214 of 400 drawn programs held one, and
    # most drawn instances of a fault's structure then hid it).
    extra = draw(st.lists(st.integers(0, len(layers) - 1), max_size=2, unique=True))
    drawn = [len(layers) - 1 - distance for distance in extra]
    return list(dict.fromkeys([len(layers), *program.unobserved_values(layers, checkpoints, incoming), *drawn]))


@st.composite
def program_specs(
    draw: st.DrawFn,
    *,
    device: str = "cpu",
    dtypes: Sequence[str] = DTYPES,
    kinds: Sequence[str] | None = None,
    max_nodes: int = MAX_NODES,
    max_dim: int = MAX_DIM,
    ops: Sequence[str] | None = None,
    grad_modes: Sequence[str] = GRAD_MODES,
    catalog_nodes: bool = True,
) -> NetSpec:
    """A valid program (`fuzz.generate.program`) on a ``(batch, features)`` input: layers of ``kinds`` (default: all;
    never a random kind or one that updates its own input) and data-flow kinds reading any earlier values (views,
    the op catalog's in-place calls, unless ``catalog_nodes`` is False), checkpointed regions, grad-mode regions (of
    ``grad_modes``), several outputs; about ``max_nodes`` layers (an update of a fresh clone may add one). Shrinks
    toward a stack: each read toward the latest value, layers before data flow, no grad mode, one output; every value
    nothing reads (after its memory's last update) is returned. An in-place update eager would reject becomes its
    out-of-place twin (`fuzz.generate.program.repaired`); inference_mode inside a selective checkpoint is dropped, and
    the input is returned too where no output would need grad.
    """
    chosen = kinds or tuple(LAYER_KINDS)
    usable = [
        kind
        for name, kind in LAYER_KINDS.items()
        if name in chosen and name not in OP_KINDS and kind.drawn and not kind.random and not kind.mutates_input
    ]
    dtype = draw(st.sampled_from(dtypes))
    # The op family rarely: a program is about how values flow, and the op family has its own draws.
    op_calls = draw(op_swarm(dtype, [k for k in OP_KINDS if k in chosen], ops)) if rarely(draw) else []
    incoming = Incoming(draw(st.integers(1, 4)), draw(st.integers(1, max_dim)), None, dtype, device)
    inputs = draw(_further_inputs(incoming, max_dim)) if catalog_nodes else []
    placed: list[tuple[LayerSpec, Any]] = [(layer, ("outside", None)) for layer in inputs]
    more = True
    while more and len(placed) < max_nodes + len(inputs):
        nodes, more = draw(_program_nodes(usable, placed, incoming, max_dim, op_calls, catalog_nodes))
        mode = _grad_mode(draw, placed[-1][0].grad_mode if placed else None, dtype, grad_modes)
        placed += [(replace(layer, grad_mode=mode), placement) for layer, placement in nodes]
    layers = [layer for layer, _ in placed]
    checkpoints = [
        replace(ckpt, api="checkpoint", nested=False, segments=1)
        for ckpt in checkpoints_from_placements([placement for _, placement in placed], layers)
    ]
    inside_selective = program.inference_in_selective(layers, checkpoints)
    layers = [replace(layer, grad_mode=None) if i in inside_selective else layer for i, layer in enumerate(layers)]
    layers = program.repaired(layers, checkpoints, incoming)
    outputs = _outputs(draw, layers, checkpoints, incoming)
    spec = NetSpec(
        features=incoming.width,
        layers=layers,
        checkpoints=checkpoints,
        batch=incoming.batch,
        dtype=dtype,
        device=device,
        seed=draw(st.integers(0, 2**16)),
        outputs=outputs,
    )
    return program.with_a_graph(spec)
