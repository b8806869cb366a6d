"""What a spec exercises, as short labels: reported through `hypothesis.event` and counted in the summary."""

from __future__ import annotations

from fuzz.generate.layers import LAYER_KINDS
from fuzz.generate.program_traits import flow_traits
from fuzz.generate.spec import NetSpec

_CHECKPOINT_FLAGS = ("use_reentrant", "selective", "nested", "extra_args", "multi_output")
NESTED = "nested checkpoints"  # once per network (the nightly slice's count)


def _model_traits(spec: NetSpec) -> list[str]:
    model = spec.model
    grouping = "mha" if model.kv_heads == model.heads else "mqa" if model.kv_heads == 1 else "gqa"
    labels = [f"model {model.arch}", f"model attention {model.attention}", f"model {model.layers} layers"]
    labels.append(f"model kv_heads {grouping}")
    for label, present in (
        ("model gradient checkpointing", model.checkpointing),
        ("model dropout", model.dropout > 0),
        ("model tied embeddings", model.tied),
    ):
        if present:
            labels.append(label)
    return labels


def region_kind(spec: NetSpec) -> str:
    """The kind of ``spec``'s checkpointed regions: their API, with "selective" for a selective policy (it saves matmul
    outputs) and "nested" for a checkpoint inside another; "mixed" for several kinds; a model's
    "gradient_checkpointing_enable"; "" without checkpoints."""
    if spec.model is not None:
        return "gradient_checkpointing_enable" if spec.model.checkpointing else ""
    flags = ("selective", "nested")
    kinds = {" ".join([ckpt.api, *(flag for flag in flags if getattr(ckpt, flag))]) for ckpt in spec.checkpoints}
    return kinds.pop() if len(kinds) == 1 else "mixed" if kinds else ""


def traits(spec: NetSpec) -> list[str]:
    """Every feature of ``spec`` worth counting: dtype, sizes, layer kinds, checkpoint APIs and options."""
    labels = [f"dtype {spec.dtype}", f"{len(spec.layers)} layers", f"{len(spec.checkpoints)} checkpoints"]
    labels += [f"layer {kind}" for kind in sorted({layer.kind for layer in spec.layers})]
    labels += [
        f"checkpointed layer {kind}"
        for kind in sorted({layer.kind for i, layer in enumerate(spec.layers) if spec.checkpointed(i)})
    ]
    labels += sorted(
        {f"decoder_block kv_heads {layer.params['kv_heads']}" for layer in spec.layers if layer.kind == "decoder_block"}
    )
    labels += sorted(
        {f"op argument axis {layer.params['mutation']['axis']}" for layer in spec.layers if "mutation" in layer.params}
    )
    for ckpt in spec.checkpoints:
        labels.append(f"checkpoint api {ckpt.api}")
        labels += [f"checkpoint {flag}" for flag in _CHECKPOINT_FLAGS if getattr(ckpt, flag)]
        if not ckpt.preserve_rng_state:
            labels.append("checkpoint preserve_rng_state=False")
        if ckpt.determinism_check != "default":
            labels.append(f"checkpoint determinism_check={ckpt.determinism_check}")
        if ckpt.api == "wrapper" and spec.layers[ckpt.start].kind in ("transformer_block", "decoder_block"):
            labels.append(f"whole {spec.layers[ckpt.start].kind} wrapped")
    if spec.model is not None:
        labels += _model_traits(spec)
    if spec.is_program:
        labels += flow_traits(spec)
    if spec.training is not None:
        labels += [f"training {spec.training.optimizer}", f"training {spec.training.steps} steps"]
        if len(set(spec.training.batches or ())) > 1:
            labels.append("training batch size changes")
    if spec.autocast:
        labels.append(f"autocast {spec.autocast}")
    if spec.spatial is not None:
        labels.append(f"image input {len(spec.spatial)}-d")
    for label, present in (
        ("sequence dim", spec.seq is not None),
        ("embedding input", spec.vocab is not None),
        ("input without grad", not spec.input_requires_grad and spec.vocab is None),
        ("frozen layer", any(layer.frozen for layer in spec.layers)),
        ("random layer", spec.random),
        (NESTED, any(ckpt.nested for ckpt in spec.checkpoints)),
        ("in-place layer", any(LAYER_KINDS[layer.kind].inplace for layer in spec.layers)),
        ("in-place update of the network's input", any(LAYER_KINDS[layer.kind].mutates_input for layer in spec.layers)),
        ("all-ones input and cotangent", spec.inputs == "ones"),
    ):
        if present:
            labels.append(label)
    return list(dict.fromkeys(labels))
