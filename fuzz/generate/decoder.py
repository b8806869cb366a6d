"""The litgpt-style decoder family: thunder's test_checkpointing_thunderfx network as a spec, and the space around it.

A decoder is a token embedding, ``blocks`` LLaMA blocks (`fuzz.generate.blocks.DecoderBlock`: RMSNorm ->
causal attention with rotary embeddings and MHA/GQA/MQA heads -> residual -> RMSNorm -> gated
MLP -> residual), a final RMSNorm and an LM head, all plain layers of a `NetSpec`, so the
builder, oracle, shrinker, reducer and repro writer treat it like any other network.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from hypothesis import strategies as st

from fuzz.generate.layer_sources import KV_HEADS
from fuzz.generate.spec import DTYPES, INPUTS, CheckpointSpec, LayerSpec, NetSpec


def _every_block(api: str, **options) -> Callable[[int], list[CheckpointSpec]]:
    return lambda blocks: [CheckpointSpec(i, i + 1, api=api, **options) for i in range(blocks)]


# Where the checkpoints go, thunder's test first (shrinking prefers it): checkpoint_wrapper on
# every block (as `apply_activation_checkpointing(..., check_fn=isinstance Block)` does), then
# the other placements the generator knows. Layers 0..blocks-1 are the blocks, then the final
# norm and the LM head.
PLACEMENTS: dict[str, Callable[[int], list[CheckpointSpec]]] = {
    "wrapper_every_block": _every_block("wrapper"),
    "checkpoint_every_block": _every_block("checkpoint"),
    "checkpoint_all_blocks": lambda blocks: [CheckpointSpec(0, blocks)],
    "selective_every_block": _every_block("checkpoint", selective=True),
    "wrapper_first_block": lambda blocks: [CheckpointSpec(0, 1, api="wrapper")],
    "checkpoint_blocks_and_head": lambda blocks: [CheckpointSpec(0, blocks + 2)],
    "nothing": lambda blocks: [],
}

# thunder's network, litgpt's "llama2-like" config: n_layer 2, n_head 4 (n_query_groups 4),
# n_embd 64, intermediate_size 1376, vocab 320, input `ones((1, 2048))`, loss `out.sum()`.
# The full length runs on CPU too: 9 s for the whole check (eager, float64 reference, thunderfx).
SEED_SEQ = 2048


def decoder_spec(
    *,
    vocab: int,
    blocks: int,
    heads: int,
    kv_heads: str,
    embedding: int,
    intermediate: int,
    seq: int,
    batch: int = 1,
    placement: str = "wrapper_every_block",
    inputs: str = "random",
    dtype: str = "float32",
    device: str = "cpu",
    seed: int = 0,
) -> NetSpec:
    """A decoder `NetSpec`: ``blocks`` decoder blocks, final RMSNorm, bias-free LM head, ``placement``."""
    params = {"heads": heads, "kv_heads": kv_heads, "hidden": intermediate}
    layers = [LayerSpec("decoder_block", dict(params)) for _ in range(blocks)]
    layers += [LayerSpec("rms_norm"), LayerSpec("linear", {"out_features": vocab, "bias": False})]
    return NetSpec(
        features=embedding,
        layers=layers,
        checkpoints=PLACEMENTS[placement](blocks),
        batch=batch,
        seq=seq,
        dtype=dtype,
        device=device,
        seed=seed,
        input_requires_grad=False,
        vocab=vocab,
        inputs=inputs,
    )


def checkpointing_thunderfx_spec(device: str) -> NetSpec:
    """thunder's test_checkpointing_thunderfx network on ``device``."""
    return decoder_spec(
        vocab=320,
        blocks=2,
        heads=4,
        kv_heads="mha",
        embedding=64,
        intermediate=1376,
        seq=SEED_SEQ,
        inputs="ones",
        device=device,
    )


@st.composite
def decoder_specs(draw: st.DrawFn, *, device: str = "cpu", dtypes: Sequence[str] = DTYPES) -> NetSpec:
    """Decoders around thunder's network; shrinking goes toward one block, width 1, thunder's placement."""
    heads = draw(st.integers(1, 4))
    return decoder_spec(
        dtype=draw(st.sampled_from(dtypes)),
        blocks=draw(st.integers(1, 3)),
        heads=heads,
        kv_heads=draw(st.sampled_from(KV_HEADS)),
        embedding=heads * draw(st.integers(1, 16)),  # heads x head size
        intermediate=draw(st.integers(1, 64)),
        vocab=draw(st.integers(2, 64)),
        seq=draw(st.integers(1, 16)),
        batch=draw(st.integers(1, 2)),
        placement=draw(st.sampled_from(list(PLACEMENTS))),
        inputs=draw(st.sampled_from(INPUTS)),
        device=device,
        seed=draw(st.integers(0, 2**16)),
    )
