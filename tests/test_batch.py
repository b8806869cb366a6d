"""Networks judged K at a time (`fuzz.judge.batch`): one thunderfx compile, each member's verdict as alone, and only a
pass concluded from a batch."""

from fuzz.generate.spec import CheckpointSpec, LayerSpec, NetSpec
from fuzz.judge.batch import judged_in_batch
from fuzz.judge.harness import check_spec
from fuzz.judge.oracle import GradientDivergence
from fuzz.registry.files import recorded_spec
from tests.faults import injected


def _net(*kinds: str, features: int = 4) -> NetSpec:
    layers = [LayerSpec(kind) for kind in kinds]
    return NetSpec(features=features, batch=2, layers=layers, checkpoints=[CheckpointSpec(0, len(layers))])


MEMBERS = [_net("relu"), _net("sigmoid", "relu", features=3), _net("tanh"), _net("gelu", features=5)]


def test_each_member_of_a_batch_is_judged_as_alone_and_passes_as_alone():
    alone = [check_spec(spec) for spec in MEMBERS]
    batched = judged_in_batch(MEMBERS, "fixed", 120.0)
    assert all(outcome is not None and outcome.valid and outcome.failure is None for outcome in batched), batched
    assert all(outcome.failure is None for outcome in alone)
    # The same results: the largest relative error of thunderfx against the float64 reference, as alone.
    for a, b in zip(alone, batched, strict=True):
        assert abs(a.discrepancy - b.discrepancy) <= 1e-6, (a.discrepancy, b.discrepancy)
    # Neither the memory contract nor a member's own compile report is claimed from a batch.
    assert all(outcome.saved_bytes is None for outcome in batched)


def test_a_member_that_fails_in_the_batch_goes_back_to_be_run_alone_and_fails_there():
    with injected("tanh-grad-x2"):  # tanh's gradient doubled inside checkpoints: only the third member has one
        batched = judged_in_batch(MEMBERS, "fixed", 120.0)
        alone = check_spec(MEMBERS[2])
    assert [outcome is None for outcome in batched] == [False, False, True, False]
    assert isinstance(alone.failure, GradientDivergence), alone.failure


def test_a_batch_that_thunder_crashes_on_sends_every_member_back():
    crashing = recorded_spec("negative-pad-crash")
    assert judged_in_batch([MEMBERS[0], crashing, MEMBERS[1]], "fixed", 120.0) == [None, None, None]
