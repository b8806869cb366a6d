"""The draw helpers shared by the stack strategy (`fuzz.strategies.net_specs`) and the program strategy
(`fuzz.generate.program_specs`): the size bounds, layers and their parameters, op swarms, checkpoint options and
where layers fall against checkpoints. Each choice shrinks toward the simpler network (`fuzz.strategies`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from hypothesis import strategies as st

from fuzz.generate import axes
from fuzz.generate.kind import Incoming, LayerKind, Param
from fuzz.generate.layers import LAYER_KINDS
from fuzz.generate.op_catalog import MUTATION_DTYPES, OpCall, catalog
from fuzz.generate.spec_parts import CHECKPOINT_APIS, DETERMINISM_CHECKS, CheckpointSpec, LayerSpec

MAX_DIM = 64
MAX_LAYERS = 8
# Images: channels and spatial sizes of the input (layers may grow them: see fuzz.generate.layer_sources.MAX_SPATIAL).
MAX_CHANNELS = 16
MAX_INPUT_SPATIAL = 8


def rarely(draw: st.DrawFn) -> bool:
    """True about one time in six; shrinks to False."""
    return draw(st.integers(0, 5)) == 5


def param_values(param: Param, width: int, max_dim: int) -> st.SearchStrategy[Any]:
    """Values of ``param`` for an incoming ``width``, from its declared domain (`fuzz.generate.kind.Param`)."""
    if param.domain == "dim":
        return st.integers(1, max_dim)
    if param.domain == "divisor":
        return st.sampled_from([d for d in range(1, width + 1) if width % d == 0])
    if param.domain == "offset":
        return st.integers(0, width - 1)
    if param.domain == "flag":
        return st.booleans()
    if param.domain == "int":
        return st.integers(param.low, param.high)
    return st.sampled_from(param.choices)


# The op family's kinds: drawn as one family whose drawn call decides the kind (see `op_swarm`).
OP_KINDS = ("op", "op_module")


@st.composite
def layer_specs(
    draw: st.DrawFn,
    kinds: Sequence[LayerKind],
    incoming: Incoming,
    max_dim: int = MAX_DIM,
    op_calls: Sequence[OpCall] = (),
) -> LayerSpec:
    """One layer for ``incoming``: of one of ``kinds`` that takes it, its parameters drawn from their declared
    domains and fitted to it, or (about half the time, when ``op_calls`` is not empty) one of the op
    family's ``op_calls``."""
    takers = [kind for kind in kinds if kind.takes(incoming)]
    if op_calls and (not takers or draw(st.integers(0, 1))):
        call = draw(st.sampled_from(op_calls))
        # Half the time one argument axis varied (fuzz.generate.axes); shrinks to thunder's sample call.
        if call.mutations and draw(st.booleans()):
            return LayerSpec(call.kind, axes.mutated(call.params, draw(st.sampled_from(call.mutations))))
        return LayerSpec(call.kind, call.params)
    # By name, in registry order: a kind added at the end of `LAYER_KINDS` leaves every saved choice naming the kind
    # it named before (tests/unit/test_strategies.py), so a fleet's year-old database entries keep their networks.
    kind = LAYER_KINDS[draw(st.sampled_from([taker.name for taker in takers]))]
    drawn = {p.name: draw(param_values(p, incoming.width, max_dim)) for p in kind.params}
    params = dict(kind.fit(drawn, incoming))
    frozen = rarely(draw) and kind.trainable(params)  # drawn for every kind: shrinking is steadier
    return LayerSpec(kind.name, params, frozen)


SWARM_OPS = 4


@st.composite
def op_swarm(draw: st.DrawFn, dtype: str, kinds: Sequence[str], ops: Sequence[str] | None) -> list[OpCall]:
    """The op calls this network may use: those of 1..`SWARM_OPS` ops drawn from the catalog (swarm testing).

    With ~160 ops, a network drawing each layer from all of them would rarely hold two calls of
    one op or of a few related ops; drawing from a small random subset makes such combinations
    dense. Shrinks toward one op, the catalog's first (elementwise unary ops come first).
    """
    if not kinds:
        return []
    calls = [call for call in catalog().calls if call.kind in kinds and dtype in call.dtypes]
    names = [op for op in dict.fromkeys(call.op for call in calls) if ops is None or op in ops]
    if not names:
        return []
    swarm = draw(st.lists(st.sampled_from(names), min_size=1, max_size=SWARM_OPS, unique=True))
    if dtype not in MUTATION_DTYPES:
        # The catalog checked the varied calls in float32 and float64 only: in another dtype eager may reject one
        # (a float64 bias beside a bfloat16 conv), and an eager error inside a non-reentrant checkpoint leaves its
        # saved-tensor hooks behind, breaking every later checkpoint of the process (RecursionError in backward).
        return [replace(call, mutations=()) for call in calls if call.op in swarm]
    return [call for call in calls if call.op in swarm]


def _checkpoint_api(draw: st.DrawFn) -> str:
    """Mostly ``checkpoint``, a quarter ``checkpoint_wrapper``, rarely ``checkpoint_sequential``; shrinks to the first.

    Sequential is rare because dynamo never compiles a network that uses it (the whole network
    runs eagerly under thunderfx: counted as a fallback, nothing of thunder tested).
    """
    choice = draw(st.integers(0, 11))
    return CHECKPOINT_APIS[0] if choice < 8 else CHECKPOINT_APIS[1] if choice < 11 else CHECKPOINT_APIS[2]


@st.composite
def checkpoint_options(draw: st.DrawFn, max_segments: int, nested: bool = False) -> CheckpointSpec:
    """The API and options of a checkpoint (placeholder span; see `checkpoints_from_placements`).

    ``use_reentrant`` is never drawn: thunder rejects reentrant checkpointing by design (the registry's
    reentrant-checkpoint-unsupported keeps that rejection re-tested). ``nested``: the body checkpoints again, for
    the nested slice (`nested_specs`); thunder crashes there, often after minutes (known issue nested-checkpoint-crash).
    """
    return CheckpointSpec(
        start=0,
        stop=max_segments,
        api=_checkpoint_api(draw),
        preserve_rng_state=not rarely(draw),
        determinism_check=draw(st.sampled_from(DETERMINISM_CHECKS)),
        selective=rarely(draw),
        nested=nested,
        segments=draw(st.integers(1, max_segments)),
        extra_args=rarely(draw),
        multi_output=rarely(draw),
    )


# Where a layer sits relative to checkpoints, simplest first: outside any checkpoint; inside
# one, joining the previous layer's checkpoint when it has one; inside a new checkpoint.
PLACEMENTS = ("outside", "inside", "new")


def _valid_for_span(options: CheckpointSpec, start: int, stop: int, layers: Sequence[LayerSpec]) -> CheckpointSpec:
    """``options`` placed on layers ``start .. stop-1``, with what its API cannot take reset to defaults."""
    ckpt = replace(options, start=start, stop=stop, segments=min(options.segments, stop - start))
    if any(LAYER_KINDS[layer.kind].inplace for layer in layers[start:stop]):
        ckpt = replace(ckpt, selective=False)  # eager refuses in-place updates of tensors the policy saved
    if any(LAYER_KINDS[layer.kind].random for layer in layers[start:stop]):
        ckpt = replace(ckpt, preserve_rng_state=True)  # else eager's recomputation draws another dropout mask
    if ckpt.use_reentrant:  # the reentrant implementation takes no context_fn, determinism_check or kwargs
        ckpt = replace(ckpt, selective=False, determinism_check="default", extra_args=False)
    if ckpt.api == "wrapper" and (stop - start != 1 or LAYER_KINDS[layers[start].kind].functional):
        ckpt = replace(ckpt, api="checkpoint")
    if ckpt.api == "wrapper":
        return replace(ckpt, nested=False, segments=1, extra_args=False, multi_output=False)
    if ckpt.api == "sequential":  # checkpoint_sequential forwards only use_reentrant and preserve_rng_state
        return replace(
            ckpt, determinism_check="default", selective=False, nested=False, extra_args=False, multi_output=False
        )
    return replace(ckpt, segments=1)


def checkpoints_from_placements(placements: Sequence[Any], layers: Sequence[LayerSpec]) -> list[CheckpointSpec]:
    """The checkpoints that per-layer ``(role, options)`` placements (roles: `PLACEMENTS`) describe."""
    spans: list[tuple[int, int, CheckpointSpec]] = []
    for index, placement in enumerate(placements):
        role, options = placement
        if role == "inside" and spans and spans[-1][1] == index:
            spans[-1] = (spans[-1][0], index + 1, spans[-1][2])
        elif role != "outside":
            spans.append((index, index + 1, options))
    return [_valid_for_span(options, start, stop, layers) for start, stop, options in spans]
