"""Training steps for the networks of every family (`fuzz.generate.spec.TrainingSpec`).

A drawn network trains for 3 to 5 steps of SGD with momentum or AdamW; half the time the batch size changes from
some step on, so that dynamo recompiles between steps. Shrinks toward 3 steps of SGD on one batch size (the reducer,
`fuzz.generate.reduce`, then tries no training, fewer steps, one batch size and SGD).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from hypothesis import assume
from hypothesis import strategies as st

from fuzz.generate.reduce import valid, without_randomness
from fuzz.generate.spec import OPTIMIZERS, NetSpec, TrainingSpec

MIN_DRAWN_STEPS, MAX_DRAWN_STEPS = 3, 5
MAX_BATCH = 4


@st.composite
def with_training(draw: st.DrawFn, specs: st.SearchStrategy[NetSpec]) -> NetSpec:
    """A network of ``specs`` (without its random layers: see `TrainingSpec`) with drawn training steps."""
    spec = draw(specs)
    if spec.random:
        spec = without_randomness(spec)
        assume(spec is not None)
    steps = draw(st.integers(MIN_DRAWN_STEPS, MAX_DRAWN_STEPS))
    optimizer = draw(st.sampled_from(OPTIMIZERS))
    training = TrainingSpec(steps, optimizer)
    if draw(st.booleans()):
        at, batch = draw(st.integers(1, steps - 1)), draw(st.integers(1, MAX_BATCH))
        changed = replace(training, batches=[spec.batch] * at + [batch] * (steps - at))
        # A network whose layers fit one batch size only (fitted to it) keeps that one.
        if batch != spec.batch and valid(replace(spec, training=changed)):
            training = changed
    trained = replace(spec, training=training)
    assume(valid(trained))  # (a program of several inputs does not train: `fuzz.generate.program.input_problems`)
    return trained


def training_families(families: Sequence[tuple[st.SearchStrategy[NetSpec], int]]) -> st.SearchStrategy[NetSpec]:
    """Networks of ``families`` ((strategy, weight) pairs, simplest and cheapest first: shrinking goes there), each
    drawn about as often as its weight says, with training steps."""
    weighted = [strategy for strategy, weight in families for _ in range(weight)]
    return with_training(st.sampled_from(weighted).flatmap(lambda strategy: strategy))
