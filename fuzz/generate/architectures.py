"""The model zoo's architectures: Hugging Face transformers models built from a tiny config, as plain data.

A `ZooModel` says which architecture and which sizes; `config_kwargs` turns it into the keyword
arguments of that architecture's transformers config class. Declarative and torch-free (the spec
imports it): each `Architecture` names its classes and how its config spells each size.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

ATTENTION_IMPLEMENTATIONS = ("eager", "sdpa")
DROPOUTS = (0.0, 0.1)


@dataclass(frozen=True)
class Architecture:
    """One transformers family: its config and model classes and the config's names for our sizes.

    ``names`` maps layers/hidden/heads/intermediate/positions to the config's keywords;
    ``kv_heads``: the keyword for key/value heads (None: as many as query heads); ``dropouts``: the
    keywords set to the drawn dropout (each inside the checkpointed layers: embedding dropout stays
    0, so every random op runs in a checkpointed layer); ``head_size_multiple``: rotary embeddings
    need an even head size (Phi rotates half of each head: a multiple of 4); ``fixed``: keywords that
    keep a tiny config valid.
    """

    config_class: str
    model_class: str
    names: dict[str, str]
    dropouts: tuple[str, ...]
    kv_heads: str | None = "num_key_value_heads"
    head_size_multiple: int = 2
    fixed: dict[str, Any] = field(default_factory=dict)


_LLAMA_NAMES = {
    "layers": "num_hidden_layers",
    "hidden": "hidden_size",
    "heads": "num_attention_heads",
    "intermediate": "intermediate_size",
    "positions": "max_position_embeddings",
}
# Token ids inside any vocabulary (GPT-2's default 50256 is outside a tiny one; transformers warns).
_TOKENS = {"bos_token_id": 0, "eos_token_id": 0, "pad_token_id": 0}

# Simplest first (shrinking prefers it): Llama, then the other decoders, then GPT-2 and the encoder.
ARCHITECTURES: dict[str, Architecture] = {
    "llama": Architecture("LlamaConfig", "LlamaForCausalLM", _LLAMA_NAMES, ("attention_dropout",), fixed=_TOKENS),
    "mistral": Architecture("MistralConfig", "MistralForCausalLM", _LLAMA_NAMES, ("attention_dropout",), fixed=_TOKENS),
    "qwen2": Architecture("Qwen2Config", "Qwen2ForCausalLM", _LLAMA_NAMES, ("attention_dropout",), fixed=_TOKENS),
    "gemma": Architecture(
        "GemmaConfig",
        "GemmaForCausalLM",
        {**_LLAMA_NAMES, "head_size": "head_dim"},
        ("attention_dropout",),
        fixed=_TOKENS,
    ),
    "phi": Architecture(
        "PhiConfig",
        "PhiForCausalLM",
        _LLAMA_NAMES,
        ("attention_dropout", "resid_pdrop"),
        head_size_multiple=4,
        fixed={**_TOKENS, "embd_pdrop": 0.0},
    ),
    "gpt2": Architecture(
        "GPT2Config",
        "GPT2LMHeadModel",
        {
            "layers": "n_layer",
            "hidden": "n_embd",
            "heads": "n_head",
            "intermediate": "n_inner",
            "positions": "n_positions",
        },
        ("attn_pdrop", "resid_pdrop"),
        kv_heads=None,
        head_size_multiple=1,
        fixed={**_TOKENS, "embd_pdrop": 0.0},
    ),
    "bert": Architecture(
        "BertConfig",
        "BertForMaskedLM",
        _LLAMA_NAMES,
        ("hidden_dropout_prob", "attention_probs_dropout_prob"),
        kv_heads=None,
        head_size_multiple=1,
        fixed={"pad_token_id": 0},
    ),
}


@dataclass
class ZooModel:
    """A transformers model: ``arch`` (a key of `ARCHITECTURES`) with ``layers`` layers of ``heads`` query heads of
    ``head_size`` (hidden = heads x head_size), ``kv_heads`` key/value heads, an MLP of ``intermediate``;
    ``dropout`` everywhere the architecture has it inside its layers; ``attention``: transformers' attention
    implementation; ``tied``: input and output embeddings share one matrix; ``checkpointing``:
    ``gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})``."""

    arch: str
    layers: int = 1
    heads: int = 1
    head_size: int = 2
    kv_heads: int = 1
    intermediate: int = 1
    dropout: float = 0.0
    attention: str = "eager"
    tied: bool = False
    checkpointing: bool = True

    @property
    def hidden(self) -> int:
        return self.heads * self.head_size


def model_problems(model: ZooModel, seq: int | None, vocab: int | None) -> list[str]:
    """What makes ``model`` (on ``seq`` tokens of ``vocab``) invalid; empty when it is valid."""
    arch = ARCHITECTURES.get(model.arch)
    if arch is None:
        return [f"model.arch {model.arch!r} is not one of {', '.join(ARCHITECTURES)}"]
    problems = [
        f"model.{name} must be a positive integer, got {getattr(model, name)!r}"
        for name in ("layers", "heads", "head_size", "kv_heads", "intermediate")
        if not (isinstance(getattr(model, name), int) and getattr(model, name) >= 1)
    ]
    if problems:
        return problems
    if model.head_size % arch.head_size_multiple:
        problems.append(
            f"model.head_size {model.head_size}: {model.arch} needs a multiple of {arch.head_size_multiple}"
        )
    if model.heads % model.kv_heads or (arch.kv_heads is None and model.kv_heads != model.heads):
        problems.append(
            f"model.kv_heads {model.kv_heads}: must divide heads ({model.heads})"
            + ("" if arch.kv_heads else f" and equal it ({model.arch} has no grouped-query attention)")
        )
    if model.dropout not in DROPOUTS:
        problems.append(f"model.dropout {model.dropout!r} is not one of {DROPOUTS}")
    if model.dropout and not model.checkpointing:
        problems.append("model.dropout needs checkpointing: a random model is judged against itself without it")
    if model.attention not in ATTENTION_IMPLEMENTATIONS:
        problems.append(f"model.attention {model.attention!r} is not one of {', '.join(ATTENTION_IMPLEMENTATIONS)}")
    for name in ("tied", "checkpointing"):
        if not isinstance(getattr(model, name), bool):
            problems.append(f"model.{name} must be true or false")
    if seq is None or vocab is None:
        problems.append("a model takes tokens: seq and vocab must be set")
    return problems


def config_kwargs(model: ZooModel, seq: int, vocab: int) -> dict[str, Any]:
    """The keyword arguments of ``model``'s transformers config class."""
    arch = ARCHITECTURES[model.arch]
    sizes = {
        "layers": model.layers,
        "hidden": model.hidden,
        "heads": model.heads,
        "intermediate": model.intermediate,
        "positions": seq,
        "head_size": model.head_size,
    }
    kwargs: dict[str, Any] = {"vocab_size": vocab, **{arch.names[key]: sizes[key] for key in arch.names}}
    if arch.kv_heads is not None:
        kwargs[arch.kv_heads] = model.kv_heads
    kwargs.update(dict.fromkeys(arch.dropouts, model.dropout))
    kwargs.update(arch.fixed)
    kwargs.update(tie_word_embeddings=model.tied, attn_implementation=model.attention, use_cache=False)
    return kwargs
