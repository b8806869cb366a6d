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


@st.composite
def _another_layer(draw: st.DrawFn, kinds: Sequence[LayerKind], max_dim: int) -> LayerSpec | None:
    # The "another layer?" flag and the layer share one span, so the shrinker deletes both at once.
    return draw(layer_specs(kinds, max_dim)) if draw(st.integers(0, 3)) > 0 else None


@st.composite
def _another_segment(draw: st.DrawFn, n_layers: int) -> tuple[int, int] | None:
    # Most specs get at least one checkpoint (Hypothesis draws 0 here less than one time in five).
    if draw(st.integers(0, 19)) == 0:
        return None
    return draw(st.integers(0, n_layers - 1)), draw(st.integers(1, n_layers))


@st.composite
def checkpoint_placements(draw: st.DrawFn, n_layers: int) -> list[CheckpointSpec]:
    """Any set of non-overlapping contiguous segments of ``n_layers`` layers, in layer order, or none.

    Segments are drawn as (start, length) pairs and a pair overlapping an earlier one is dropped,
    so removing a pair while shrinking never invalidates the others.
    """
    taken: set[int] = set()
    segments = []
    for _ in range(n_layers):
        if (pair := draw(_another_segment(n_layers))) is None:
            break
        start, length = pair
        span = set(range(start, min(start + length, n_layers)))
        if not span & taken:
            taken |= span
            segments.append(CheckpointSpec(start, max(span) + 1))
    return sorted(segments, key=lambda c: c.start)


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
    layers = [draw(layer_specs(usable, max_dim))]
    while len(layers) < max_layers and (layer := draw(_another_layer(usable, max_dim))) is not None:
        layers.append(layer)
    checkpoints = draw(checkpoint_placements(len(layers)))
    seed = draw(st.integers(0, 2**16))
    return NetSpec(
        features=features,
        layers=layers,
        checkpoints=checkpoints,
        batch=batch,
        seq=seq,
        dtype=dtype,
        device=device,
        seed=seed,
    )
