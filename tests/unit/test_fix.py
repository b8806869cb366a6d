"""The meta-preserving converter, on a real dynamo-captured checkpointed graph."""

import copy

import pytest
import thunder.dynamo.utils as thunder_dynamo_utils
import torch
from torch import nn
from torch.utils.checkpoint import checkpoint

import fuzz.fix
from fuzz.fix import (
    FIXED_CONVERTER,
    STOCK_CONVERTER,
    StaleFixError,
    converter_for,
    describe,
    fixed_converter,
    meta_preserving,
    stock_converter_preserves_meta,
    use_converter,
)

meta_preserving_checkpoint_function_converter = FIXED_CONVERTER


class _Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(6, 6)
        self.norm = nn.LayerNorm(6)

    def body(self, x):
        return torch.tanh(self.norm(nn.functional.gelu(self.linear(x)))) + x

    def forward(self, x):
        return checkpoint(self.body, x, use_reentrant=False)


@pytest.fixture(scope="module")
def checkpoint_body() -> torch.fx.GraphModule:
    """The body GraphModule of the checkpoint, as dynamo captured it (before any thunder conversion)."""
    captured = []

    def backend(gm, example_inputs):
        captured.append(copy.deepcopy(gm))
        return gm

    torch._dynamo.reset()
    torch.compile(_Net(), backend=backend)(torch.randn(2, 6, requires_grad=True))
    torch._dynamo.reset()
    (gm,) = captured
    (node,) = gm.graph.find_nodes(op="call_function", target=torch.ops.higher_order.tag_activation_checkpoint)
    return getattr(gm, node.args[0].target)


def _converted_nodes(gm: torch.fx.GraphModule) -> list[torch.fx.Node]:
    return [
        n for n in gm.graph.nodes if n.op == "call_function" and n.target.__module__ not in ("_operator", "builtins")
    ]


def test_every_converted_node_keeps_the_meta_of_the_node_it_replaced(checkpoint_body):
    body = copy.deepcopy(checkpoint_body)
    before = _converted_nodes(body)
    assert len(before) >= 4, "the captured body should hold linear, gelu, layer_norm and tanh"
    metas = [(n.target, dict(n.meta)) for n in before]
    meta_preserving_checkpoint_function_converter(body)
    after = _converted_nodes(body)
    assert len(after) == len(metas)
    for node, (torch_target, meta) in zip(after, metas, strict=True):
        assert node.target is thunder_dynamo_utils._torch_to_thunder_function_map[torch_target]
        assert node.meta.keys() == meta.keys() and "example_value" in meta
        assert node.meta["example_value"].shape == meta["example_value"].shape
        assert node.meta["example_value"].dtype == meta["example_value"].dtype


def test_the_fix_is_thunders_own_converter_plus_the_copied_meta(checkpoint_body):
    fixed, stock = copy.deepcopy(checkpoint_body), copy.deepcopy(checkpoint_body)
    FIXED_CONVERTER(fixed)
    STOCK_CONVERTER(stock)
    assert fixed.code == stock.code  # the same graph: only the meta differs
    assert [n.target for n in fixed.graph.nodes] == [n.target for n in stock.graph.nodes]
    assert torch.fx.Node.replace_all_uses_with.__name__ == "replace_all_uses_with"  # restored after the call
    assert "wrapped to copy each replaced node's meta" in describe("fixed") and "unmodified" in describe("stock")


def test_a_converter_the_fix_no_longer_applies_to_is_a_clear_error(monkeypatch):
    def rewrites_targets_in_place(gm):  # a thunder whose converter no longer replaces nodes
        for node in gm.graph.nodes:
            if node.op == "call_function":
                node.target = thunder_dynamo_utils._torch_to_thunder_function_map[node.target]
                node.meta = {}
        gm.recompile()

    monkeypatch.setattr(fuzz.fix, "FIXED_CONVERTER", meta_preserving(rewrites_targets_in_place))
    fixed_converter.cache_clear()
    try:
        with pytest.raises(StaleFixError, match="no longer replaces nodes through Node.replace_all_uses_with"):
            converter_for("fixed")
    finally:
        fixed_converter.cache_clear()


def test_stock_converter_drops_the_meta(checkpoint_body):
    # The bug the fix addresses, shown on thunder 0.2.6; if thunder fixes it, `converter_for` says so.
    body = copy.deepcopy(checkpoint_body)
    STOCK_CONVERTER(body)
    assert all("example_value" not in n.meta for n in _converted_nodes(body))
    assert not stock_converter_preserves_meta()


def test_converter_installed_and_restored_even_when_nested_or_twice():
    assert thunder_dynamo_utils._checkpoint_function_converter is STOCK_CONVERTER
    with use_converter("fixed"):
        assert thunder_dynamo_utils._checkpoint_function_converter is meta_preserving_checkpoint_function_converter
        with use_converter("fixed"), use_converter("stock"):
            assert thunder_dynamo_utils._checkpoint_function_converter is STOCK_CONVERTER
        assert thunder_dynamo_utils._checkpoint_function_converter is meta_preserving_checkpoint_function_converter
    assert thunder_dynamo_utils._checkpoint_function_converter is STOCK_CONVERTER


def test_converter_restored_after_an_exception():
    with pytest.raises(RuntimeError), use_converter("fixed"):
        raise RuntimeError("boom")
    assert thunder_dynamo_utils._checkpoint_function_converter is STOCK_CONVERTER


def test_unknown_converter_is_a_clear_error():
    with pytest.raises(ValueError, match="unknown converter 'fixd': choose one of fixed, stock"):
        converter_for("fixd")


def test_fixture_installs_the_fixed_converter(fixed_converter):
    assert thunder_dynamo_utils._checkpoint_function_converter is meta_preserving_checkpoint_function_converter


def test_the_fix_restores_torch_fx_when_thunders_converter_raises():
    original = torch.fx.Node.replace_all_uses_with

    def raises(gm):
        raise RuntimeError("Unexpected call_module detected inside a checkpoint")

    with pytest.raises(RuntimeError, match="Unexpected call_module"):
        meta_preserving(raises)(torch.fx.symbolic_trace(lambda x: torch.tanh(x)))
    assert torch.fx.Node.replace_all_uses_with is original
