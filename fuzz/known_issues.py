"""Known thunder bugs and limitations: predicates over the spec, so CI stays green while fuzzing goes on.

The ``ci`` profile skips specs an entry matches. Every other profile still runs them (unless the
entry is ``slow``) and counts, per entry, whether the failure still reproduces, so a thunder fix
shows up in the summary.
Each entry's shrunk spec and repro.py live in ``known_issues/<id>/``, with ``versions.json``: the thunder
versions it was last seen to reproduce on and the first version found fixed (``ckpt-fuzz bisect --record``).
An entry is expected only on thunder versions before its fix.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, replace
from functools import cache
from pathlib import Path

from packaging.version import Version

from fuzz.known_issue_signatures import observe, read_entry, resemblance
from fuzz.layers import LAYER_KINDS
from fuzz.oracle import ParityFailure
from fuzz.reduce import valid, without_layers
from fuzz.spec import LayerSpec, NetSpec
from fuzz.thunder_versions import installed

LayerTrigger = Callable[[NetSpec, int], bool]
KNOWN_ISSUES_DIR = Path(__file__).resolve().parent.parent / "known_issues"
VERSIONS_FILE = "versions.json"


@cache
def _version_record(path: Path) -> dict:
    return json.loads(path.read_text()) if path.exists() else {}


_entry = cache(read_entry)
installed_thunder = cache(installed)  # the thunder this process imports does not change while it runs


class KnownIssueChanged(AssertionError):
    """A registered known issue no longer reproduces on the installed thunder, or reproduces on a version its record
    says is fixed (a finding, not a harness error)."""


@dataclass(frozen=True)
class KnownIssue:
    """A failure thunder is known to show on every spec ``applies`` accepts (on versions before its fix)."""

    id: str
    description: str
    failure_classes: tuple[str, ...]
    applies: Callable[[NetSpec], bool]
    # The spec with this issue's trigger taken out (the in-place layer replaced by its out-of-place
    # twin, the offending op layer deleted, ...): a failure is this issue only if it then goes away.
    without_trigger: Callable[[NetSpec], NetSpec]
    # Too slow to re-run on every matching example (thunder takes up to the time limit to fail):
    # skipped in every profile; its registered spec is what tells whether it still reproduces.
    slow: bool = False

    def versions(self) -> dict:
        """The entry's version record (see `fuzz.version_bisect.version_record`; empty before any bisection)."""
        return _version_record(KNOWN_ISSUES_DIR / self.id / VERSIONS_FILE)

    def expected_on(self, thunder: str) -> bool:
        """Whether the issue is expected on thunder version ``thunder``: from its recorded introduction (if any)
        to before its recorded fix (if any)."""
        record = self.versions()
        introduced_in, fixed_in = record.get("introduced_in"), record.get("fixed_in")
        return (introduced_in is None or Version(thunder) >= Version(introduced_in)) and (
            fixed_in is None or Version(thunder) < Version(fixed_in)
        )

    def reproduced_by(self, failure: ParityFailure | None, spec: NetSpec) -> bool:
        """Whether ``failure`` of ``spec`` is this issue showing (see `difference`)."""
        return self.difference(failure, spec) is None

    def difference(self, failure: ParityFailure | None, spec: NetSpec) -> str | None:
        """None when ``failure`` of ``spec`` is this issue showing: a failure of one of its classes that matches the
        signature recorded in its ``entry.toml`` inside the band (`fuzz.known_issue_signatures`; an entry without
        one, a slow entry never run in a campaign, matches by class); else how it differs."""
        if failure is None or failure.failure_class not in self.failure_classes:
            return f"another class ({failure.failure_class if failure else 'no failure'})"
        entry = _entry(KNOWN_ISSUES_DIR / self.id)
        return None if entry is None else resemblance(entry, observe(spec, failure))

    def status(self, reproduced: bool, thunder: str) -> tuple[str, bool]:
        """The verdict of a re-test of the entry on thunder version ``thunder`` that ``reproduced`` it or not, and
        whether that is what the record expects."""
        if self.expected_on(thunder):
            return ("reproduces", True) if reproduced else ("no longer reproduces", False)
        record = self.versions()
        fixed = record.get("fixed_in") and Version(thunder) >= Version(record["fixed_in"])
        window = f"fixed in {record['fixed_in']}" if fixed else f"introduced in {record.get('introduced_in')}"
        return (
            (f"reproduces outside its recorded range ({window})", False)
            if reproduced
            else (f"not expected: {window}", True)
        )


def _layer_issue(
    id: str,
    description: str,
    failure_classes: tuple[str, ...],
    trigger: LayerTrigger,
    without_trigger: Callable[[NetSpec], NetSpec] | None = None,
) -> KnownIssue:
    """An issue set off by single layers (``trigger(spec, index)``); by default removed by deleting those layers."""
    return KnownIssue(
        id,
        description,
        failure_classes,
        lambda spec: any(trigger(spec, i) for i in range(len(spec.layers))),
        without_trigger
        or (lambda spec: without_layers(spec, [i for i in range(len(spec.layers)) if trigger(spec, i)])),
    )


def _as_linear(trigger: LayerTrigger) -> Callable[[NetSpec], NetSpec]:
    """Replace each layer ``trigger`` accepts (a Linear followed by an in-place activation) by its Linear."""

    def strip(spec: NetSpec) -> NetSpec:
        layers = [
            LayerSpec("linear", {"out_features": layer.params["out_features"], "bias": True}, layer.frozen)
            if trigger(spec, i)
            else layer
            for i, layer in enumerate(spec.layers)
        ]
        return replace(spec, layers=layers)

    return strip


KNOWN_ISSUES: tuple[KnownIssue, ...] = (
    KnownIssue(
        "reentrant-checkpoint-unsupported",
        "thunder rejects reentrant checkpointing: RuntimeError 'torch.checkpoint: use_reentrant=True is not "
        "supported in Thunder' (a documented limitation, also through checkpoint_wrapper's REENTRANT impl); "
        "on small bodies thunder's interpreter takes minutes before it says so (a timeout here)",
        ("thunder-crash", "timeout"),
        lambda spec: any(c.use_reentrant for c in spec.checkpoints),
        lambda spec: replace(spec, checkpoints=[replace(c, use_reentrant=False) for c in spec.checkpoints]),
        slow=True,
    ),
    KnownIssue(
        "nested-checkpoint-crash",
        "a checkpoint inside a checkpointed function crashes thunderfx: the checkpoint converter rewrites only "
        "the outer body, so the inner body calls torch ops on TensorProxy ('TypeError: tanh(): argument "
        "'input' (position 1) must be Tensor, not TensorProxy'), often only after minutes of interpretation; "
        "the meta-preserving fix does not change it",
        ("thunder-crash", "timeout"),
        lambda spec: any(c.nested for c in spec.checkpoints),
        lambda spec: replace(spec, checkpoints=[replace(c, nested=False) for c in spec.checkpoints]),
        slow=True,
    ),
)


def _is_inplace_silu(spec: NetSpec, index: int) -> bool:
    return spec.layers[index].kind == "linear_silu_inplace"


def _inplace_activation_after_narrow(spec: NetSpec, index: int) -> bool:
    """A Linear with an in-place activation (not the residual) after a narrow_swap."""
    return spec.layers[index].kind in ("linear_relu_inplace", "linear_silu_inplace") and any(
        earlier.kind == "narrow_swap" for earlier in spec.layers[:index]
    )


def _thunder_runs_it(spec: NetSpec) -> bool:
    """Whether thunder compiles the network and is judged against eager: dynamo runs a network with a
    checkpoint_sequential eagerly, and a random network is judged against thunder itself."""
    return not spec.random and not any(c.api == "sequential" for c in spec.checkpoints)


def _in_compiled_checkpoint(spec: NetSpec, index: int) -> bool:
    # checkpoint_sequential regions are never compiled (dynamo runs them eagerly), so they cannot show thunder bugs.
    return any(c.start <= index < c.stop and c.api != "sequential" for c in spec.checkpoints)


def _dropout_layer_in_compiled_checkpoint(spec: NetSpec, index: int) -> bool:
    return spec.device == "cpu" and LAYER_KINDS[spec.layers[index].kind].random and _in_compiled_checkpoint(spec, index)


def _dropout_in_compiled_checkpoint(spec: NetSpec) -> bool:
    """A transformers model on CPU with dropout in its checkpointed layers."""
    return spec.device == "cpu" and spec.model is not None and spec.model.dropout > 0 and spec.model.checkpointing


KNOWN_ISSUES += (
    _layer_issue(
        "inplace-update-in-checkpoint-wrong-grad",
        "in-place updates inside a checkpointed function (y = linear(x); y += x; y.mul_(0.5)) are wrong under "
        "thunderfx: the y.mul_(0.5) is lost, so the output (when used after the checkpoint) and the gradients are "
        "2x eager's; correct without the checkpoint; the same with the stock converter",
        ("forward-divergence", "gradient-divergence"),
        lambda spec, i: spec.layers[i].kind == "inplace_residual" and _in_compiled_checkpoint(spec, i),
    ),
    _layer_issue(
        "inplace-silu-wrong-grad",
        "nn.SiLU(inplace=True) after a Linear gives wrong gradients for the input and the Linear's parameters "
        "under thunderfx (~10% off, up to 3x per element): always outside checkpoints; inside a checkpoint when "
        "more ops follow it there (e.g. GELU, SwiGLU); not checkpoint-specific",
        ("gradient-divergence",),
        _is_inplace_silu,
        _as_linear(_is_inplace_silu),
    ),
    KnownIssue(
        "dropout-in-checkpoint-fresh-mask",
        "on CPU, dropout inside a checkpointed function is recomputed in backward with a fresh random mask "
        "(thunder's RNG replay, uniform_philox, is CUDA-only), so the gradients belong to another sample than "
        "the forward: checkpoint-specific (thunderfx without the checkpoint is consistent); preserve_rng_state=True "
        "is ignored; the same with the stock converter. Also in transformers models with gradient checkpointing "
        "(the model zoo found it in a Llama's attention dropout: thunder's gradient is not the derivative of its own "
        "forward); not where the checkpointed layers fall back to inductor (GPT-2's Conv1D)",
        ("gradient-divergence",),
        lambda spec: (
            _dropout_in_compiled_checkpoint(spec)
            or any(_dropout_layer_in_compiled_checkpoint(spec, i) for i in range(len(spec.layers)))
        ),
        lambda spec: (
            replace(spec, model=replace(spec.model, dropout=0.0))
            if spec.model is not None
            else without_layers(
                spec, [i for i in range(len(spec.layers)) if _dropout_layer_in_compiled_checkpoint(spec, i)]
            )
        ),
    ),
    _layer_issue(
        "narrow-then-inplace-crash",
        "Tensor.narrow (which thunderfx sends to its fallback) followed later by an in-place activation "
        "(nn.ReLU/SiLU(inplace=True) after a Linear) crashes thunderfx: 'RuntimeError: Attempting to reshape "
        "a.shape=(1, 2) to shape=(1, 1)'; with or without checkpoints (thunder-general)",
        ("thunder-crash",),
        _inplace_activation_after_narrow,
        _as_linear(_inplace_activation_after_narrow),
    ),
)


def _op_layer(ops: tuple[str, ...], where: Callable[[dict], bool] = lambda params: True) -> LayerTrigger:
    """A trigger: an op layer (fuzz.ops) of one of ``ops`` whose params satisfy ``where``."""
    return lambda spec, i: spec.layers[i].params.get("op") in ops and where(spec.layers[i].params)


def _float_tensor_args(params: dict) -> list[dict]:
    return [a for a in [*params["args"], *params["kwargs"].values()] if isinstance(a, dict) and "tensor" in a]


# In-place ops whose gradient thunderfx gets wrong (or crashes on) outside checkpoints, measured with
# Linear -> adapt -> clone -> op_ (see inplace-op-on-clone-wrong-grad).
_INPLACE_WRONG = frozenset(
    "abs acos asin atan cos cosh digamma erf erfc erfinv exp2 expm1 sin sinh sqrt lgamma log log10 log1p log2 "
    "square copysign fmod div remainder prims_remainder".split()
)

# Found by the op sweep (thunder's OpInfo samples through thunderfx inside one checkpoint).
KNOWN_ISSUES += (
    _layer_issue(
        "binary-op-zero-dim-tensor-crash",
        "a binary op (add, sub, mul, div, true_divide, atan2, maximum, minimum) of a (4, 4) tensor and a 0-dim tensor "
        "that requires grad crashes thunderfx in every call form: 'RuntimeError: shape [1] is invalid for input of "
        "size 16'; with or without checkpoints (thunder-general)",
        ("thunder-crash",),
        _op_layer(
            ("add", "sub", "mul", "true_divide", "div", "atan2", "maximum", "minimum"),
            lambda p: any(a["tensor"] == [] for a in _float_tensor_args(p)[1:]),
        ),
    ),
    _layer_issue(
        "zero-gradient-output-loses-requires-grad",
        "the output of an op whose derivative is zero (ceil, floor, round, trunc, sign) or that is empty "
        "(repeat with a 0) does not require grad under thunderfx, where eager's does, so backward raises "
        "'element 0 of tensors does not require grad' (thunder-general)",
        ("thunder-crash",),
        lambda spec, i: (
            _op_layer(("ceil", "floor", "round", "trunc", "sign"))(spec, i)
            or _op_layer(("repeat",), lambda p: 0 in _ints(p["args"][1:]))(spec, i)
        ),
    ),
    _layer_issue(
        "expand-to-zero-size-crash",
        "Tensor.expand of a (1, 1) tensor to size (0, 0) crashes thunderfx: a bare AssertionError (thunder-general)",
        ("thunder-crash",),
        _op_layer(("expand",), lambda p: 0 in _ints(p["args"][1:])),
    ),
    _layer_issue(
        "negative-pad-crash",
        "F.pad with negative padding (cropping) crashes thunderfx with a bare AssertionError (thunder-general)",
        ("thunder-crash",),
        _op_layer(("torch_pad",), lambda p: any(i < 0 for i in _ints([*p["args"][1:2], p["kwargs"].get("pad")]))),
    ),
    _layer_issue(
        "index-add-inductor-lowering-crash",
        "index_add (function, method, in-place) is sent to thunderfx's inductor fallback, whose lowering of "
        "aten.index_put_ fails: 'InductorError: LoweringException: AssertionError' (thunder-general)",
        ("thunder-crash",),
        _op_layer(("index_add",)),
    ),
    _layer_issue(
        "nll-loss-unbatched-dtype-crash",
        "F.nll_loss of an unbatched (1-D) float32 input and a 0-dim target crashes thunderfx: 'RuntimeError: "
        "expected scalar type Float but found Double' (thunder-general)",
        ("thunder-crash",),
        _op_layer(("nll_loss",), lambda p: len(_float_tensor_args(p)[0]["tensor"]) == 1),
    ),
    _layer_issue(
        "sdpa-fully-masked-row-nan",
        "F.scaled_dot_product_attention with a boolean attn_mask that masks a whole row: thunderfx's output and "
        "gradients hold NaN where eager's are finite (thunder-general)",
        ("forward-divergence", "gradient-divergence"),
        _op_layer(
            ("scaled_dot_product_attention",),
            lambda p: any(_masks_a_whole_row(a) for a in [*p["args"], *p["kwargs"].values()]),
        ),
    ),
    _layer_issue(
        "inplace-op-on-clone-wrong-grad",
        "outside checkpoints, an in-place unary op on a clone of a computed tensor (`y.clone().abs_()`, sin_, "
        "cos_, log_, sqrt_, erf_, ... whose backward needs its input) gets a wrong gradient under thunderfx, "
        "silently (abs_: the sign of a weight's gradient flips): thunder differentiates with the mutated tensor; "
        "remainder_/fmod-like ops raise autograd's 'modified by an inplace operation' instead; correct inside a "
        "checkpoint (thunder-general)",
        ("gradient-divergence", "thunder-crash"),
        lambda spec, i: (
            spec.layers[i].params.get("form") == "inplace"
            and spec.layers[i].params["op"] in _INPLACE_WRONG
            and not _in_compiled_checkpoint(spec, i)
        ),
    ),
    _layer_issue(
        "lerp-zero-dim-inductor-cpp-error",
        "torch.lerp of three 0-dim tensors inside a checkpoint: thunderfx sends the region to inductor, whose "
        "vectorized C++ kernel does not compile on CPU ('invalid cast from Vectorized<float> to float'); "
        "without the checkpoint thunder runs it (checkpoint-specific)",
        ("thunder-crash",),
        lambda spec, i: (
            spec.device == "cpu"
            and _op_layer(("lerp",), lambda p: all(a["tensor"] == [] for a in _float_tensor_args(p)))(spec, i)
            and _in_compiled_checkpoint(spec, i)
        ),
    ),
    _layer_issue(
        "max-pool-stride-none-crash",
        "F.max_pool3d (and its 1d/2d siblings) with stride=None (the documented default: the kernel size) crashes "
        "thunderfx: 'aten::max_pool3d_with_indices() Expected a value of type List[int] for argument stride but "
        "instead found type NoneType' (thunder-general; found by the nightly campaign's op sweep)",
        ("thunder-crash",),
        _op_layer(("max_pool1d", "max_pool2d", "max_pool3d"), lambda p: _stride(p) is None),
    ),
    _layer_issue(
        "sigmoid-grad-nan-large-negative",
        "thunderfx's sigmoid gradient is NaN for inputs below about -90 (float32), where eager's is 0: "
        "torch.sigmoid(torch.tensor(-500.)) backward; reached when a sigmoid follows an op whose output grows "
        "large (sinh, exp, pow, ...) (thunder-general; found by the nightly campaign)",
        ("gradient-divergence",),
        # The trigger is the sigmoid (or the layer computing one) after an explosive op: the bug is the sigmoid's, and
        # taking it out must not take a new bug of the explosive op with it.
        lambda spec, i: (
            _applies_sigmoid(spec.layers[i]) and any(layer.params.get("op") in _EXPLOSIVE for layer in spec.layers[:i])
        ),
    ),
    _layer_issue(
        "hardsigmoid-float64-grad-imprecise",
        "in float64, thunderfx's hardsigmoid gradient is off by ~2e-8 (float32 precision: a float32 1/6), where "
        "eager is exact (thunder-general)",
        ("gradient-divergence",),
        lambda spec, i: spec.dtype == "float64" and _op_layer(("hardsigmoid",))(spec, i),
    ),
)

# Found by dev campaigns on thunder 0.2.6 (CPU); the accuracy entries: thunder is right in float32.
KNOWN_ISSUES += (
    _layer_issue(
        "head-size-1-attention-autocast-stride-crash",
        "attention with one feature per head (features == heads >= 2), a batch of 2 or more, under "
        "torch.autocast(bfloat16) around the forward crashes thunderfx: 'AssertionError: expected size 2==2, "
        "stride 1==2 at dim=1; ... incorrect fake (aka meta) kernel' (Attention, TransformerBlock, litgpt's "
        "DecoderBlock alike; thunder-general)",
        ("thunder-crash",),
        lambda spec, i: (
            spec.layers[i].kind in _ATTENTION_KINDS
            and spec.batch >= 2
            and spec.layers[i].params["heads"] == spec.widths()[i] >= 2
            and (spec.autocast == "forward" or (spec.autocast == "checkpoints" and spec.checkpointed(i)))
        ),
    ),
    _layer_issue(
        "gelu-after-op-bfloat16-inaccurate",
        "a bfloat16 GELU that follows another op (log_softmax -> gelu, 52 features) loses precision under "
        "thunderfx: outputs of -0 where float64 gives -0.0026 (2 of 52 elements; 17x eager's error), while a "
        "lone bfloat16 gelu matches eager; right in float32 (accuracy, thunder-general)",
        ("accuracy",),
        lambda spec, i: spec.dtype == "bfloat16" and i > 0 and _applies_gelu(spec.layers[i]),
    ),
    _layer_issue(
        "attention-bfloat16-grad-inaccurate",
        "thunderfx's bfloat16 attention backward is far less accurate than eager's: causal Attention(7 heads) -> "
        "ReLU -> Linear -> Linear(-> 1), batch 4, sequence 3: the k weight gradient is 37% of the tensor's scale off "
        "(drift 0.92x; another seed: 2.9x the scale, 0.15x) while thunderfx is right in float32; float16 and "
        "F.scaled_dot_product_attention alike. Beyond an accuracy gap's bound (docs/oracle.md): a wrong result in "
        "low precision, matched by its band (thunder-general)",
        ("accuracy", "gradient-divergence"),
        lambda spec, i: (
            spec.dtype in ("bfloat16", "float16")
            and (spec.layers[i].kind in _ATTENTION_KINDS or _op_layer(("scaled_dot_product_attention",))(spec, i))
        ),
    ),
    _layer_issue(
        "mish-bfloat16-grad-inaccurate",
        "thunderfx's bfloat16 mish backward drifts: mish -> elu -> Mish -> Mish (an embedding input, 57 features) "
        "gives an embedding-weight gradient ~0.976x float64 (4.2x eager's error; in another network 0.994x, 8.7x), "
        "while thunderfx is right in float32 (accuracy, thunder-general; found by the injection matrix's draws)",
        ("accuracy",),
        lambda spec, i: spec.dtype == "bfloat16" and _applies("mish")(spec.layers[i]),
    ),
    _layer_issue(
        "max-dim-tie-grad-split",
        "torch.max(x, dim) where x holds ties (relu -> .to -> RMSNorm -> max(dim=0), float32): eager sends the "
        "whole gradient to the index max returns, thunderfx splits it among the tied elements (as amax does), so "
        "a weight's gradient differs (thunder-general; found by the injection matrix's draws)",
        ("gradient-divergence",),
        _op_layer(("torch_max",), lambda p: len(p["args"]) > 1 or "dim" in p["kwargs"]),
    ),
    _layer_issue(
        "softmax-bfloat16-grad-inaccurate",
        "thunderfx's bfloat16 softmax backward is less accurate than eager's: torch.softmax(x, dim=1) of a (2, 2) "
        "tensor, one input-gradient element 0.0518 where float64 gives 0.0743 (30% of the tensor's scale, 16x "
        "eager's error), while thunderfx is right in float32: beyond an accuracy gap's bound (docs/oracle.md), a "
        "wrong result in low precision, matched by its band (thunder-general; found by the verdict-trust campaign)",
        ("accuracy", "gradient-divergence"),
        lambda spec, i: spec.dtype == "bfloat16" and _applies("softmax")(spec.layers[i]),
    ),
)


def _view_update(where: Callable[[dict, bool], bool]) -> LayerTrigger:
    """A trigger: an in-place update through a view (`view_update`, `input_update`) whose params satisfy ``where``
    (its second argument: whether the layer runs in a compiled checkpoint)."""
    return lambda spec, i: (
        spec.layers[i].kind in ("view_update", "input_update")
        and where(spec.layers[i].params, _in_compiled_checkpoint(spec, i))
    )


# Found by the mutation family (issue 14) on thunder 0.2.6 (CPU); measured over every view x update x read
# (features 4, batch 3, float32): outside checkpoints add_ then a read of the base is right (but for a narrow that
# another layer follows: narrow-add-then-next-layer-grad-broken, found later); inside checkpoints
# every view but narrow fails (thunderfx sends narrow's regions to its inductor fallback, which is right).
KNOWN_ISSUES += (
    _layer_issue(
        "inplace-view-then-view-read-crash",
        "an in-place update through a view followed by a read of that view (y = x * 2; v = y[0]; v.add_(0.5); "
        "y + v.sum()) crashes thunderfx for select, slice, view, transpose, diagonal ('RuntimeError: expand: the "
        "requested shape has too few dimensions!', 'expand: attempting to expand a dimension of length 4!') and "
        "narrow ('Attempting to reshape a.shape=(3, 1) to shape=(3, 4)'), or silently gives another output or input "
        "gradient (unsqueeze); inside a checkpoint narrow falls back to inductor, which is right (thunder-general)",
        ("thunder-crash", "forward-divergence", "gradient-divergence"),
        _view_update(lambda p, checkpointed: p["read"] == "view" and not (checkpointed and p["view"] == "narrow")),
    ),
    _layer_issue(
        "inplace-view-grad-dropped",
        "outside checkpoints, an in-place update whose derivative is not 1 (mul_, copy_, relu_, sin_) through a view "
        "(y[0], y[:, 1:], y.view(-1), y.transpose(0, 1), y.narrow(-1, 0, 1), y.unsqueeze(0)) of y = x * 2 gives x a "
        "wrong gradient under thunderfx, silently: thunder differentiates as if the update were not there "
        "(mul_(3): 2 where eager gives 6), or crashes with a bare AssertionError (y = x.clone(); y[0].mul_(3) on a "
        "(1, 1, 1) float16 image: found by the new-kinds campaign); add_ is right but through a narrow that another "
        "layer follows (narrow-add-then-next-layer-grad-broken) (thunder-general)",
        ("gradient-divergence", "thunder-crash"),
        # (An update of the network's own input has no gradient to drop unless an embedding makes it.)
        lambda spec, i: (
            _view_update(
                lambda p, checkpointed: (
                    not checkpointed and p["read"] == "base" and p["update"] != "add_" and p["view"] != "diagonal"
                )
            )(spec, i)
            and (spec.layers[i].kind == "view_update" or spec.vocab is not None)
        ),
    ),
    _layer_issue(
        "diagonal-inplace-update-lost",
        "an in-place update through y.diagonal(dim1=0, dim2=1) is lost from thunderfx's output (y = x * 2; "
        "y.diagonal(0, 1).add_(0.5): the diagonal is 0.5 lower than eager's), every update alike; inside a "
        "checkpoint thunderfx crashes with a bare AssertionError instead (thunder-general)",
        ("forward-divergence", "gradient-divergence", "thunder-crash"),
        _view_update(lambda p, checkpointed: p["view"] == "diagonal" and p["read"] == "base"),
    ),
    _layer_issue(
        "inplace-view-in-checkpoint-crash",
        "inside a checkpointed function thunder runs no in-place update through a view: y = x * 2; y[0].add_(0.5); "
        "return y crashes thunderfx with 'RuntimeError: a leaf Variable that requires grad is being used in an "
        "in-place operation.' (AssertionError for relu_), for select, indexing, slices, view, reshape, transpose, "
        "unsqueeze, method and function forms alike, or, on other shapes, silently loses the update from the output "
        "(an image input of 7: every element 1.0 off); narrow only escapes because its region falls back to "
        "inductor; add_ is right without the checkpoint (checkpoint-specific for add_, thunder-general for the "
        "updates thunder gets wrong outside checkpoints too)",
        ("thunder-crash", "forward-divergence", "gradient-divergence"),
        _view_update(
            lambda p, checkpointed: checkpointed and p["read"] == "base" and p["view"] not in ("narrow", "diagonal")
        ),
    ),
    _layer_issue(
        "narrow-add-then-next-layer-grad-broken",
        "outside checkpoints, an in-place add_ through y.narrow(-1, 0, 1) of y = x * 2 or x.clone(), then any layer "
        "on y: thunderfx's output does not require grad ('RuntimeError: element 0 of tensors does not require grad "
        "and does not have a grad_fn': a (batch, 1) input, then relu, tanh, ...), or it crashes with 'Attempting to "
        "reshape a.shape=(1, 1) to shape=(1, 4)' (a (1, 4) input, then a checkpointed relu), or the input's gradient "
        "is silently 0 (then a checkpointed Linear: eager -2.33); the same add_ through a slice or select is right, "
        "and so is the narrow as the network's last layer (thunder-general; found by the mutation family)",
        ("thunder-crash", "gradient-divergence"),
        lambda spec, i: (
            i + 1 < len(spec.layers)
            and _view_update(
                lambda p, checkpointed: (
                    not checkpointed
                    and p.get("on") in ("product", "clone")
                    and (p["view"], p["update"], p["read"]) == ("narrow", "add_", "base")
                )
            )(spec, i)
        ),
    ),
    _layer_issue(
        "buffer-update-in-checkpoint-lost",
        "inside a checkpointed function, an in-place update of a buffer under torch.no_grad() (an EMA: "
        "self.mean.mul_(0.9).add_(0.1 * x.mean())) is not applied by thunderfx: the buffer keeps its old value after "
        "forward and after backward, where eager updates it; on other shapes (an image input of 1 element, "
        "float16/bfloat16, or through checkpoint_wrapper) thunderfx crashes instead with 'UnboundLocalError: cannot "
        "access local variable 't54' where it is not associated with a value'; right outside checkpoints, and "
        "BatchNorm's running statistics are right inside them (checkpoint-specific)",
        ("state-divergence", "thunder-crash"),
        lambda spec, i: spec.layers[i].kind == "buffer_update" and _in_compiled_checkpoint(spec, i),
    ),
    _layer_issue(
        "instance-norm-running-stats-not-updated",
        "nn.InstanceNorm1d/2d/3d(track_running_stats=True) in training mode: thunderfx never updates running_mean "
        "and running_var (they stay 0 and 1 after forward, where eager moves them by momentum 0.1), with or "
        "without checkpoints, or (batch 2, an image of 2) crashes with 'RuntimeError: unsupported operation: more "
        "than one element of the written-to tensor refers to a single memory location'; BatchNorm's are updated "
        "(thunder-general; found by the state oracle)",
        ("state-divergence", "thunder-crash"),
        lambda spec, i: (
            spec.layers[i].kind == "instance_norm"
            and spec.layers[i].params["track_running_stats"]
            and _thunder_runs_it(spec)
        ),
    ),
)


# Ops whose output can far exceed their input's range (inputs are mapped into thunder's sample ranges).
_EXPLOSIVE = frozenset(
    "sinh cosh exp exp2 expm1 pow square tan reciprocal ldexp lgamma digamma polygamma zeta div true_divide".split()
)


def _applies(activation: str, *kinds: str) -> Callable[[LayerSpec], bool]:
    """Whether a layer applies ``activation``: its own kind, the op, an MLP's activation, or one of ``kinds``."""
    return lambda layer: (
        layer.kind in (activation, *kinds)
        or layer.params.get("op") == activation
        or (layer.kind in ("mlp", "residual") and layer.params.get("activation") == activation)
    )


# SwiGLU computes silu(fc_1(x)) * fc_2(x); the transformer and decoder blocks hold one; the conv blocks call F.silu.
_applies_silu = _applies(
    "silu", "linear_silu_inplace", "swiglu", "transformer_block", "decoder_block", "conv_block", "unet_block"
)


def _applies_sigmoid(layer: LayerSpec) -> bool:
    """A sigmoid, or a silu (x sigmoid(x))."""
    return _applies("sigmoid")(layer) or _applies_silu(layer)


_applies_gelu = _applies("gelu")
_ATTENTION_KINDS = ("attention", "transformer_block", "decoder_block")


def _stride(params: dict) -> object:
    """A pooling call's stride: keyword, third positional argument, or the default None."""
    return params["kwargs"].get("stride", params["args"][2] if len(params["args"]) > 2 else None)


def _masks_a_whole_row(literal: object) -> bool:
    """A boolean tensor literal (fuzz.ops) with a row that is all False."""
    if not (isinstance(literal, dict) and literal.get("dtype") == "bool"):
        return False

    def rows(values: object) -> list:
        if isinstance(values, list) and values and not isinstance(values[0], list):
            return [values]
        return [row for item in values for row in rows(item)] if isinstance(values, list) else []

    return any(not any(row) for row in rows(literal["values"]))


def _ints(literal: object) -> list[int]:
    """Every integer in a literal argument list (fuzz.ops encoding)."""
    if isinstance(literal, bool):
        return []
    if isinstance(literal, int):
        return [literal]
    if isinstance(literal, list):
        return [i for item in literal for i in _ints(item)]
    if isinstance(literal, dict) and "tensor" not in literal:
        return [i for item in literal.values() for i in _ints(item)]
    return []


def explained_by(
    spec: NetSpec,
    issues: Sequence[KnownIssue],
    converter: str,
    timeout_s: float | None,
    in_flight: Callable[[NetSpec], AbstractContextManager] = lambda spec: nullcontext(),
) -> bool:
    """Whether known ``issues`` explain a failure of ``spec`` in their classes: it goes away without their triggers.

    A network that is nothing but the triggers is explained by them; one that taking them out leaves invalid,
    or whose stripped run is invalid, is not (reported as a new failure rather than hidden). ``in_flight``: what
    to run the stripped network within (a campaign records it, should its process die).
    """
    from fuzz.harness import check_spec  # here: `ckpt-fuzz bisect` imports this module and must not import thunder

    stripped = spec
    for issue in issues:
        stripped = issue.without_trigger(stripped)
    if not stripped.layers:
        return True
    if not valid(stripped):  # taking the trigger out broke the network: no evidence either way
        return False
    with in_flight(stripped):
        outcome = check_spec(stripped, converter=converter, timeout_s=timeout_s)
    return outcome.valid and outcome.failure is None


def known_issues_for(spec: NetSpec) -> list[KnownIssue]:
    """The known issues whose predicate accepts ``spec`` and that are expected on the installed thunder (a failure
    of an entry fixed in this version is a regression, reported as new)."""
    return [issue for issue in KNOWN_ISSUES if issue.applies(spec) and issue.expected_on(installed_thunder())]
