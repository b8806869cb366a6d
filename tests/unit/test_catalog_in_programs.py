"""The op catalog inside programs (fuzz.generate.flow's view kinds, fuzz.generate.catalog_flow's updates): what each
node declares (its matrix, sharing memory, contiguity) is what eager does; an update updates its value in place and
its twin does not; eager's rejections are validation's; reduction tries today's update in a catalog update's place."""

import re

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from fuzz.generate.catalog_flow import as_function, left_out, twin_source, update_calls, update_source
from fuzz.generate.flow import VIEW_KINDS
from fuzz.generate.kind import Incoming
from fuzz.generate.program_traits import flow_traits
from fuzz.generate.reduce import _candidates
from fuzz.generate.spec import LayerSpec, NetSpec, SpecError, validate


def _source(kind, params: dict, width: int) -> str:
    return kind.source(params, width)


@settings(max_examples=200, deadline=None, database=None)
@given(
    kind=st.sampled_from(VIEW_KINDS),
    rows=st.integers(1, 5),
    width=st.integers(1, 6),
    transposed=st.booleans(),
    data=st.data(),
)
def test_each_view_kind_gives_the_matrix_it_declares_sharing_memory_contiguous_where_it_says(
    kind, rows, width, transposed, data
):
    base = torch.randn(width, rows).t() if transposed else torch.randn(rows, width)
    incoming = Incoming(rows, width)
    if kind.flow.needs_contiguous and transposed and not base.is_contiguous():
        return  # validation's rule (test below)
    drawn = {
        p.name: data.draw(st.integers(p.low, min(p.high, 8)) if p.domain == "int" else st.integers(1, 8))
        for p in kind.params
    }
    if any(p.domain == "divisor" for p in kind.params):
        drawn = {"parts": data.draw(st.sampled_from([d for d in range(1, width + 1) if width % d == 0]))}
    params = dict(kind.fit(drawn, incoming))
    out = eval(f"lambda x: {_source(kind, params, width)}", {"torch": torch})(base)
    declared = kind.output(params, incoming)
    assert tuple(out.shape) == (declared.batch, declared.width), (kind.name, params)
    assert out.untyped_storage().data_ptr() == base.untyped_storage().data_ptr(), kind.name  # a view
    parent_contiguous = base.is_contiguous()
    says = parent_contiguous and (kind.flow.contiguous is None or kind.flow.contiguous(params, incoming))
    assert not says or out.is_contiguous(), (kind.name, params)  # never claims contiguity it lacks


def test_the_catalog_updates_cover_its_unary_and_binary_in_place_ops_and_say_why_the_rest_is_left_out():
    targets = {call.target for call in update_calls()}
    assert {"tanh_", "sin_", "exp_", "abs_", "neg_"} <= targets
    assert {call.target for call in update_calls() if call.partner is not None} >= {"atan2_", "lerp_", "div_"}
    assert len(update_calls()) >= 40
    assert "non-finite on values of either sign" in left_out().values()  # log_, sqrt_: a program's values have signs


def test_updates_shrink_toward_one_that_changes_values_of_either_sign_and_those_that_keep_some_come_last():
    targets = [call.target for call in update_calls()]
    assert targets[0] == "atan_" and targets.index("abs_") > targets.index("sin_")  # abs_ keeps positive values
    x = torch.tensor([[-1.3, -0.2, 0.4, 2.1]])
    first = as_function(update_source(vars(update_calls()[0])))(x.clone(), x.clone())
    assert not bool((first == x).any())


@pytest.mark.parametrize("call", update_calls()[:60:6], ids=lambda call: call.target)
def test_an_update_updates_its_value_in_place_and_its_twin_does_not(call):
    x, y = torch.randn(3, 4) * 1, torch.randn(3, 4)
    before = x.clone()
    result = as_function(update_source(call.params))(x, y)
    assert result.data_ptr() == x.data_ptr()
    expected = as_function(twin_source(call.params))(before, y)
    assert torch.equal(x, expected) or torch.allclose(x, expected, equal_nan=True)
    assert torch.equal(before, before.clone())


def _program(*layers: LayerSpec, outputs=None) -> NetSpec:
    return NetSpec(features=3, batch=2, layers=list(layers), outputs=outputs)


_TANH = next(call for call in update_calls() if call.target == "tanh_")


@pytest.mark.parametrize(
    ("spec", "problem"),
    [
        (
            _program(LayerSpec("transpose", reads=[0]), LayerSpec("view", {"cols": 1}, reads=[1])),
            "may not be contiguous (eager's view of it fails",
        ),
        (  # its point is a transposed layout
            _program(LayerSpec("transpose_contiguous", reads=[0]), LayerSpec("view", {"cols": 1}, reads=[1])),
            "may not be contiguous (eager's view of it fails",
        ),
        (  # a clone keeps a transpose's strides
            _program(LayerSpec("transpose", reads=[0]), LayerSpec("clone", reads=[1]),
                     LayerSpec("view", {"cols": 1}, reads=[2])),
            "may not be contiguous (eager's view of it fails",
        ),
        (
            _program(LayerSpec("clone", reads=[0]), LayerSpec("expand", {"rows": 2}, reads=[1]),
                     LayerSpec("update_op", _TANH.params, reads=[2])),
            "whose elements share memory",
        ),
        (_program(LayerSpec("update_op", _TANH.params, reads=[0])), "updates the network's input in place"),
        (_program(LayerSpec("narrow", {"dim": 1, "start": 5, "length": 1}, reads=[0])), "do not fit"),
    ],
    ids=["view-of-a-transpose", "view-of-a-transposed-layout", "view-of-a-clone-of-a-transpose", "update-of-an-expand",
         "update-of-the-input", "narrow-out-of-range"],
)  # fmt: skip
def test_what_eager_rejects_among_catalog_nodes_is_not_a_valid_program(spec, problem):
    with pytest.raises(SpecError, match=re.escape(problem)):
        validate(spec)


def test_a_catalog_update_through_a_view_is_valid_runs_eagerly_and_reduces_toward_todays_update():
    spec = _program(
        LayerSpec("clone", reads=[0]),
        LayerSpec("narrow", {"dim": 1, "start": 1, "length": 2}, reads=[1]),
        LayerSpec("update_op", _TANH.params, reads=[2]),
        outputs=[1],
    )
    validate(spec)
    assert "program update through a view" in flow_traits(spec)
    assert "program catalog update tanh_" in flow_traits(spec)
    candidates = list(_candidates(spec))
    plain = [c for c in candidates if [layer.kind for layer in c.layers] == ["clone", "narrow", "sigmoid_"]]
    assert plain and plain[0].layers[2].params == {}
    validate(plain[0])
    # A view or an update is swapped only for a kind that reads and updates alike, never for a stack layer (relu).
    swapped = [c.layers[i].kind for c in candidates if len(c.layers) == 3 for i in (1, 2)]
    assert not set(swapped) & {"relu", "tanh", "sigmoid", "softmax"}, sorted(set(swapped))
    assert {"alias", "transpose"} & set(swapped), sorted(set(swapped))
