"""Hypothesis strategies that draw valid `NetSpec`s.

Written to shrink well: every choice shrinks toward the simpler network (fewer layers, width
1, float32, no sequence dim, fewer checkpoints, the first entry of each registry). Every
layer kind accepts any input width and every dtype drawn is one the kind declares, so every
spec is valid by construction.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from hypothesis import strategies as st

from fuzz.layers import LAYER_KINDS, LayerKind, Param
from fuzz.spec import DTYPES, CheckpointSpec, LayerSpec, NetSpec

MAX_DIM = 64
MAX_LAYERS = 8


def _param_values(param: Param, max_dim: int) -> st.SearchStrategy[Any]:
    if param.domain == "dim":
        return st.integers(1, max_dim)
    if param.domain == "flag":
        return st.booleans()
    return st.sampled_from(param.choices)


@st.composite
def layer_specs(draw: st.DrawFn, kinds: Sequence[LayerKind], max_dim: int = MAX_DIM) -> LayerSpec:
    """One layer of one of ``kinds`` with its parameters drawn from their declared domains."""
    kind = draw(st.sampled_from(kinds))
    return LayerSpec(kind.name, {p.name: draw(_param_values(p, max_dim)) for p in kind.params})


# Where a layer sits relative to checkpoints, simplest first: outside any checkpoint; inside
# one, joining the previous layer's checkpoint when it has one; inside a new checkpoint.
PLACEMENTS = ("outside", "inside", "new")


@st.composite
def _placed_layer(draw: st.DrawFn, kinds: Sequence[LayerKind], max_dim: int) -> tuple[LayerSpec, str]:
    return draw(layer_specs(kinds, max_dim)), draw(st.sampled_from(PLACEMENTS))


@st.composite
def _another_layer(draw: st.DrawFn, kinds: Sequence[LayerKind], max_dim: int) -> tuple[LayerSpec, str] | None:
    # The "another layer?" flag, the layer and its placement share one span, so the shrinker
    # deletes a layer (checkpoint membership included) by deleting one span.
    return draw(_placed_layer(kinds, max_dim)) if draw(st.integers(0, 3)) > 0 else None


def checkpoints_from_placements(placements: Sequence[str]) -> list[CheckpointSpec]:
    """The checkpoint segments that per-layer ``placements`` (see `PLACEMENTS`) describe."""
    segments: list[CheckpointSpec] = []
    for index, placement in enumerate(placements):
        if placement == "inside" and segments and segments[-1].stop == index:
            segments[-1].stop = index + 1
        elif placement != "outside":
            segments.append(CheckpointSpec(index, index + 1))
    return segments


@st.composite
def net_specs(
    draw: st.DrawFn,
    *,
    device: str = "cpu",
    dtypes: Sequence[str] = DTYPES,
    kinds: Sequence[str] | None = None,
    max_layers: int = MAX_LAYERS,
    max_dim: int = MAX_DIM,
) -> NetSpec:
    """A valid `NetSpec` on ``device`` using layer ``kinds`` (default: the whole vocabulary)."""
    dtype = draw(st.sampled_from(dtypes))
    usable = [LAYER_KINDS[name] for name in (kinds or LAYER_KINDS) if dtype in LAYER_KINDS[name].dtypes]
    batch = draw(st.integers(1, 4))
    seq = draw(st.integers(1, 8)) if draw(st.booleans()) else None
    features = draw(st.integers(1, max_dim))
    placed = [draw(_placed_layer(usable, max_dim))]
    while len(placed) < max_layers and (another := draw(_another_layer(usable, max_dim))) is not None:
        placed.append(another)
    seed = draw(st.integers(0, 2**16))
    return NetSpec(
        features=features,
        layers=[layer for layer, _ in placed],
        checkpoints=checkpoints_from_placements([placement for _, placement in placed]),
        batch=batch,
        seq=seq,
        dtype=dtype,
        device=device,
        seed=seed,
    )
