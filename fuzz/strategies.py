"""Hypothesis strategies that draw valid `NetSpec`s.

Written to shrink well: every choice shrinks toward the simpler network (fewer layers, width
1, float32, no sequence dim, no embedding, fewer and plainer checkpoints, the first entry of
each registry). Widths are tracked while drawing (some parameters depend on the incoming
width) and each checkpoint's options are resolved to ones its API accepts, so every spec is
valid by construction.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from hypothesis import assume
from hypothesis import strategies as st

from fuzz.generate.draws import (
    MAX_CHANNELS,
    MAX_DIM,
    MAX_INPUT_SPATIAL,
    MAX_LAYERS,
    OP_KINDS,
    PLACEMENTS,
    checkpoint_options,
    checkpoints_from_placements,
    layer_specs,
    op_swarm,
    rarely,
)
from fuzz.generate.kind import Incoming, LayerKind
from fuzz.generate.layers import LAYER_KINDS
from fuzz.generate.op_catalog import OpCall
from fuzz.generate.spec import (
    AUTOCAST_REGIONS,
    DTYPES,
    CheckpointSpec,
    LayerSpec,
    NetSpec,
    any_trainable,
    input_update_allowed,
)


@st.composite
def _placed_layer(
    draw: st.DrawFn,
    kinds: Sequence[LayerKind],
    incoming: Incoming,
    max_dim: int,
    op_calls: Sequence[OpCall],
    nested: bool,
) -> tuple[LayerSpec, Any, bool]:
    """A layer, its placement (with the options of a checkpoint it may open) and whether more layers follow.

    All three share one span, so the shrinker deletes a layer, its checkpoint membership and
    options included, by deleting one span; the flag comes last so the remaining layers stay valid.
    """
    layer = draw(layer_specs(kinds, incoming, max_dim, op_calls))
    role = draw(st.sampled_from(PLACEMENTS))
    options = draw(checkpoint_options(MAX_LAYERS, nested)) if role != "outside" else None
    return layer, (role, options), draw(st.integers(0, 3)) > 0


@st.composite
def _spatial(draw: st.DrawFn, kinds: Sequence[LayerKind]) -> list[int] | None:
    """An image input's spatial sizes (1 to 3 dims), or None for features: images only where ``kinds`` hold
    a "channels" kind; one network in four beside "features" kinds, one in two beside "any" ones only."""
    layouts = {kind.layout for kind in kinds}
    if "channels" not in layouts:
        return None
    if layouts != {"channels"} and draw(st.integers(0, 3)) < (3 if "features" in layouts else 2):
        return None
    return draw(st.lists(st.integers(1, MAX_INPUT_SPATIAL), min_size=1, max_size=3))


def _input_updates_where_eager_allows(
    layers: list[LayerSpec], checkpoints: list[CheckpointSpec], input_requires_grad: bool, can_skip_input_grad: bool
) -> tuple[list[LayerSpec], bool]:
    """The layers with each in-place update of a layer's own input kept only where eager allows it, and whether the
    input then requires grad.

    Eager allows it only on the network's own input, outside checkpoints, when that input is not a leaf that
    requires grad: a checkpoint rejects a mutated input (its saved-input version check), and after another
    layer the update may overwrite an output that layer saved for backward. Elsewhere the update goes to a
    product of the input instead (a `view_update`).
    """
    first_allowed = input_update_allowed(
        0, any(c.start == 0 for c in checkpoints), input_requires_grad and not can_skip_input_grad
    )
    fitted = []
    for index, layer in enumerate(layers):
        if LAYER_KINDS[layer.kind].mutates_input and not (index == 0 and first_allowed):
            layer = LayerSpec("view_update", {**layer.params, "on": "product"})
        fitted.append(layer)
    mutated = LAYER_KINDS[fitted[0].kind].mutates_input
    return fitted, input_requires_grad and not mutated


def _compiled_where_random(checkpoints: list[CheckpointSpec], layers: list[LayerSpec]) -> list[CheckpointSpec]:
    """``checkpoints``, checkpoint_sequential made a plain checkpoint where a layer is random: dynamo never compiles
    checkpoint_sequential (the whole network then runs eagerly), and a random network's oracle needs thunder to draw
    its random numbers (see fuzz.judge.verdict)."""
    if not any(LAYER_KINDS[layer.kind].random for layer in layers):
        return checkpoints
    return [replace(c, api="checkpoint", segments=1) if c.api == "sequential" else c for c in checkpoints]


@st.composite
def net_specs(
    draw: st.DrawFn,
    *,
    device: str = "cpu",
    dtypes: Sequence[str] = DTYPES,
    kinds: Sequence[str] | None = None,
    max_layers: int = MAX_LAYERS,
    max_dim: int = MAX_DIM,
    ops: Sequence[str] | None = None,
    nested: bool = False,
) -> NetSpec:
    """A valid `NetSpec` on ``device`` using layer ``kinds`` (default: the whole vocabulary).

    ``ops``: the op family's ops to draw from (default: every drawable one); ``nested``: every checkpoint that can
    nests (see `checkpoint_options`).
    """
    chosen = kinds or tuple(LAYER_KINDS)
    # In registry order whatever order ``kinds`` lists them in (see `layer_specs`).
    usable = [kind for name, kind in LAYER_KINDS.items() if name in chosen and name not in OP_KINDS and kind.drawn]
    dtype = draw(st.sampled_from(dtypes))
    op_calls = draw(op_swarm(dtype, [k for k in OP_KINDS if k in chosen], ops))
    batch = draw(st.integers(1, 4))
    spatial = draw(_spatial(usable))
    seq = draw(st.integers(1, 8)) if spatial is None and draw(st.booleans()) else None
    features = draw(st.integers(1, max_dim if spatial is None else min(max_dim, MAX_CHANNELS)))
    vocab = draw(st.integers(2, 64)) if spatial is None and rarely(draw) else None
    incoming, more, placed = Incoming(batch, features, spatial and tuple(spatial), dtype, device), True, []
    while more and len(placed) < max_layers and (op_calls or any(kind.takes(incoming) for kind in usable)):
        layer, placement, more = draw(_placed_layer(usable, incoming, max_dim, op_calls, nested))
        placed.append((layer, placement))
        incoming = LAYER_KINDS[layer.kind].output(layer.params, incoming)
    layers = [layer for layer, _ in placed]
    assume(layers)  # the input was one no kind of ``kinds`` takes
    checkpoints = _compiled_where_random(checkpoints_from_placements([p for _, p in placed], layers), layers)
    autocast = draw(st.sampled_from(AUTOCAST_REGIONS[1:])) if rarely(draw) and dtype == "float32" else None
    if autocast == "checkpoints" and not any(c.api == "checkpoint" for c in checkpoints):
        autocast = "forward"
    trainable = any_trainable(layers)
    seed = draw(st.integers(0, 2**16))
    # Tokens never require grad; a float input goes without grad only when some layer trains.
    input_requires_grad = vocab is None and (not rarely(draw) or not trainable)
    if any(LAYER_KINDS[layer.kind].mutates_input for layer in layers):
        layers, input_requires_grad = _input_updates_where_eager_allows(
            layers, checkpoints, input_requires_grad, trainable or vocab is not None
        )
    return NetSpec(
        features=features,
        layers=layers,
        checkpoints=checkpoints,
        batch=batch,
        seq=seq,
        dtype=dtype,
        device=device,
        seed=seed,
        input_requires_grad=input_requires_grad,
        vocab=vocab,
        autocast=autocast,
        spatial=spatial,
    )
