"""The model-zoo family: Hugging Face transformers models with gradient checkpointing, as thunder users train them.

Each spec is a tiny config of one architecture (`fuzz.generate.architectures`), built from code (no weights
downloaded) and checkpointed the way users switch it on,
``model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})``, so the
checkpoint calls come from inside transformers. The network returns the model's logits; repro.py
builds it with plain transformers + torch.
"""

from __future__ import annotations

from collections.abc import Sequence

from hypothesis import strategies as st

from fuzz.generate.architectures import ARCHITECTURES, ATTENTION_IMPLEMENTATIONS, DROPOUTS, ZooModel, config_kwargs
from fuzz.generate.spec import DTYPES, INPUTS, NetSpec


def zoo_spec(model: ZooModel, *, vocab: int, seq: int, batch: int = 1, **options) -> NetSpec:
    """The `NetSpec` of ``model`` on ``(batch, seq)`` tokens of ``vocab`` (``options``: dtype, device, seed, inputs)."""
    return NetSpec(
        features=model.hidden,
        layers=[],
        batch=batch,
        seq=seq,
        vocab=vocab,
        input_requires_grad=False,
        model=model,
        **options,
    )


# The first example of the family: the 2-layer Llama with GQA that matched eager when the family was proposed.
SEED_MODEL = zoo_spec(ZooModel("llama", layers=2, heads=4, head_size=8, kv_heads=2, intermediate=64), vocab=64, seq=8)


def model_source(spec: NetSpec) -> tuple[str, str]:
    """The ``Net`` and ``PlainNet`` classes of a model spec (`fuzz.model_builder.network_source` adds the rest)."""
    model = spec.model
    arch = ARCHITECTURES[model.arch]
    kwargs = config_kwargs(model, spec.seq, spec.vocab)
    config = "".join(f"\n            {key}={value!r}," for key, value in kwargs.items())
    enable = 'self.model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})'
    checkpointing = f"\n        if checkpointing:\n            {enable}" if model.checkpointing else ""
    classes = f'''
class Net(nn.Module):
    """transformers' {arch.model_class} from a tiny config; its logits."""

    def __init__(self, checkpointing=True):
        super().__init__()
        config = transformers.{arch.config_class}({config}
        )
        self.model = transformers.{arch.model_class}(config){checkpointing}

    def forward(self, x):
        return self.model(input_ids=x).logits


class PlainNet(Net):
    """``Net`` without gradient checkpointing (same parameters)."""

    def __init__(self):
        super().__init__(checkpointing=False)
'''
    return "import transformers\n", classes


@st.composite
def zoo_specs(
    draw: st.DrawFn, *, device: str = "cpu", dtypes: Sequence[str] = DTYPES, architectures: Sequence[str] = ()
) -> NetSpec:
    """Tiny transformers models of ``architectures`` (default: all); shrinking goes toward the first of them (Llama),
    one layer, the smallest sizes, no dropout."""
    arch = draw(st.sampled_from(list(architectures or ARCHITECTURES)))
    heads = draw(st.integers(1, 4))
    grouped = ARCHITECTURES[arch].kv_heads is not None
    kv_heads = draw(st.sampled_from([k for k in range(1, heads + 1) if heads % k == 0])) if grouped else heads
    checkpointing = draw(st.sampled_from((True, False)))
    model = ZooModel(
        arch,
        layers=draw(st.integers(1, 2)),
        heads=heads,
        head_size=ARCHITECTURES[arch].head_size_multiple * draw(st.integers(1, 4)),
        kv_heads=kv_heads,
        intermediate=draw(st.integers(1, 64)),
        dropout=draw(st.sampled_from(DROPOUTS)) if checkpointing else 0.0,
        attention=draw(st.sampled_from(ATTENTION_IMPLEMENTATIONS)),
        tied=draw(st.booleans()),
        checkpointing=checkpointing,
    )
    return zoo_spec(
        model,
        vocab=draw(st.integers(2, 64)),
        seq=draw(st.integers(1, 16)),
        batch=draw(st.integers(1, 2)),
        dtype=draw(st.sampled_from(dtypes)),
        inputs=draw(st.sampled_from(INPUTS)),
        device=device,
        seed=draw(st.integers(0, 2**16)),
    )
