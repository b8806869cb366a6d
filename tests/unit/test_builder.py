"""The builder: every layer kind builds and runs, the source is standalone, builds are deterministic."""

import pytest
import torch

from fuzz.generate.catalog_flow import update_calls
from fuzz.generate.draws import OP_KINDS
from fuzz.generate.kind import Incoming
from fuzz.generate.layers import LAYER_KINDS
from fuzz.generate.op_catalog import catalog
from fuzz.generate.ops import plumbing_params
from fuzz.generate.reduce import PLUMBING, STAND_IN
from fuzz.generate.spec import DTYPES, CheckpointSpec, LayerSpec, NetSpec, validate
from fuzz.model_builder import build_example, network_source
from fuzz.run.passes import call_on, forward_backward, fresh_input, input_tensors


def _params(kind_name: str) -> dict:
    # The op family's params come from its catalog (tests/unit/test_op_family.py: all of them).
    if kind_name in OP_KINDS:
        return next(call for call in catalog().calls if call.kind == kind_name and call.variant > 0).params
    if LAYER_KINDS[kind_name].params and LAYER_KINDS[kind_name].params[0].name == "call":  # the catalog's updates
        partner = LAYER_KINDS[kind_name].flow.reads == 2
        return next(call for call in update_calls() if (call.partner is not None) == partner).params
    if kind_name in (PLUMBING, STAND_IN):  # the plumbing (or a stand-in) of an op layer of two tensor arguments
        args = plumbing_params(next(call for call in catalog().calls if call.op == "sub").params)
        return args if kind_name == PLUMBING else {**args, "function": "cos"}
    # Widths differ from the input width (5) so a wrong out_features shows up as a shape error.
    values = {"dim": 3, "divisor": 5, "offset": 2, "flag": True}
    return {
        p.name: p.high if p.domain == "int" else values.get(p.domain, p.choices[-1] if p.choices else None)
        for p in LAYER_KINDS[kind_name].params
    }


def _inputs(kind_name: str) -> list[tuple[int, ...] | None]:
    """Spatial sizes to build a kind on: None (features) and images of 1 to 3 spatial dims, where it takes them."""
    candidates = [None, (4,), (4, 4), (2, 4, 4)]
    return [s for s in candidates if LAYER_KINDS[kind_name].takes(Incoming(2, 5, s))]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(("kind", "spatial"), [(k, s) for k in LAYER_KINDS for s in _inputs(k)], ids=str)
def test_every_layer_kind_builds_and_runs_forward_and_backward(kind, spatial, dtype):
    layer_kind, incoming = LAYER_KINDS[kind], Incoming(2, 5, spatial, dtype)
    layers = [LayerSpec(kind, dict(layer_kind.fit(_params(kind), incoming)))]
    # A program's: on the input, or updating a clone of it (tests/unit/test_programs.py).
    if layer_kind.flow is not None:
        layers = [LayerSpec("clone", reads=[0])] if layer_kind.flow.updates else []
        reads = [len(layers), 0][: layer_kind.flow.reads]
        layers.append(LayerSpec(kind, dict(layer_kind.fit(_params(kind), incoming)), reads=reads))
        spatial = None
        # (A detached value needs no grad; an input is an argument, returned beside the first one.)
        outputs = [len(layers), 0] if layer_kind.flow.detaches or layer_kind.flow.input else None
    else:
        outputs = None
    if layer_kind.mutates_input:  # on the network's input, which then needs no grad, outside checkpoints
        trainable = "batch_norm" if spatial else "linear"
        layers.append(LayerSpec(trainable, dict(LAYER_KINDS[trainable].fit(_params(trainable), incoming))))
    spec = NetSpec(
        features=5,
        batch=2,
        seq=None if spatial or layer_kind.flow else 3,
        spatial=spatial and list(spatial),
        dtype=dtype,
        layers=layers,
        # (An input is made outside checkpoints: it exists before the call.)
        checkpoints=[]
        if layer_kind.mutates_input or (layer_kind.flow and layer_kind.flow.input)
        else [CheckpointSpec(0, len(layers))],
        input_requires_grad=not layer_kind.mutates_input,
        outputs=outputs,
    )
    validate(spec)
    example = build_example(spec)
    out = call_on(example.net, example.input)
    assert out.shape == spec.output_shape == example.cotangent.shape
    assert out.dtype == getattr(torch, dtype)
    out.backward(example.cotangent)
    first = input_tensors(example.input)[0]
    grads = [first.grad] if spec.input_requires_grad else [p.grad for p in example.net.parameters()]
    assert all(torch.isfinite(g).all() for g in grads)
    assert sum(g.abs().sum() for g in grads) > 0


def _stack() -> NetSpec:
    return NetSpec(
        features=4,
        batch=2,
        seq=None,
        seed=7,
        layers=[
            LayerSpec("linear", {"out_features": 6, "bias": True}),
            LayerSpec("gelu"),
            LayerSpec("residual", {"hidden": 3, "activation": "tanh"}),
            LayerSpec("layer_norm", {"elementwise_affine": True}),
            LayerSpec("mlp", {"hidden": 5, "out_features": 2, "activation": "silu"}),
        ],
        checkpoints=[CheckpointSpec(1, 3), CheckpointSpec(4, 5)],
    )


def test_builds_are_deterministic_in_the_seed():
    a, b = build_example(_stack()), build_example(_stack())
    assert torch.equal(a.input, b.input) and torch.equal(a.cotangent, b.cotangent)
    for (name, p), (_, q) in zip(a.net.named_parameters(), b.net.named_parameters(), strict=True):
        assert torch.equal(p, q), name
    other = _stack()
    other.seed = 8
    assert not torch.equal(build_example(other).input, a.input)


def test_source_is_standalone_and_checkpoints_the_declared_segments():
    source = network_source(_stack())
    assert "fuzz" not in source.replace("fuzz-net", "")
    namespace: dict = {}
    exec(source, namespace)  # nothing but the source itself
    net, x, cotangent = namespace["make_example"]()
    assert source.count("checkpoint(self.checkpointed") == 2
    assert "def checkpointed0(self, x):\n        x = self.layer1(x)\n        x = self.layer2(x)\n" in source
    net(x).backward(cotangent)
    assert x.grad is not None


def _every_checkpoint_shape(autocast: str | None) -> NetSpec:
    linear = LayerSpec("linear", {"out_features": 4, "bias": True})
    return NetSpec(
        features=4,
        batch=2,
        seq=3,
        autocast=autocast,
        layers=[linear, LayerSpec("dropout", {"p": "0.5"}), LayerSpec("tanh"), linear, LayerSpec("gelu"), linear,
                LayerSpec("relu"), LayerSpec("transformer_block", {"heads": 2, "hidden": 5, "causal": True})],
        checkpoints=[
            CheckpointSpec(0, 3, nested=True, extra_args=True, multi_output=True),
            CheckpointSpec(3, 4, api="wrapper"),
            CheckpointSpec(4, 6, api="sequential", segments=2),
            CheckpointSpec(7, 8, api="wrapper"),
        ],
    )  # fmt: skip


@pytest.mark.parametrize("autocast", [None, "forward", "checkpoints"])
def test_plain_net_is_the_same_network_without_its_checkpoints(autocast):
    spec = _every_checkpoint_shape(autocast)
    checkpointed, plain = build_example(spec), build_example(spec, checkpointing=False)
    source = network_source(spec)
    assert "checkpoint(" not in source.split("class PlainNet")[1].split("SEED =")[0]
    assert type(plain.net).__name__ == "PlainNet" and "_checkpoint_wrapped_module" in str(checkpointed.net)
    eager, eager_plain = (
        forward_backward(e.net, e.net, fresh_input(e.input), e.cotangent) for e in (checkpointed, plain)
    )
    # Same modules, same seed before each run (so the same dropout masks), same functions: same numbers.
    assert torch.equal(eager[0], eager_plain[0])
    assert eager[1].keys() == eager_plain[1].keys()
    for name, grad in eager[1].items():
        assert torch.allclose(grad, eager_plain[1][name], rtol=1e-6, atol=1e-7), name


@pytest.mark.parametrize("vocab", [None, 5])
def test_ones_inputs_are_what_thunders_test_feeds(vocab):
    spec = NetSpec(
        features=3, layers=[LayerSpec("linear", {"out_features": 2, "bias": True})], seq=4, vocab=vocab, inputs="ones"
    )
    example = build_example(spec)
    assert torch.equal(example.input, torch.ones_like(example.input)) and torch.equal(
        example.cotangent, torch.ones(1, 4, 2)
    )
    assert example.input.dtype == (torch.int64 if vocab else torch.float32)
