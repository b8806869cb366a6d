"""The registry's entries: the known thunder bugs and limitations, each a claim over specs (`fuzz.registry.issue`).

A spec an entry matches still runs (unless the entry is ``slow``) and counts as reproduced or not; each entry's
folder ``known_issues/<id>/`` holds its spec, repro.py, recorded signature and the thunder versions it reproduces on.
"""

from __future__ import annotations

from dataclasses import replace

from fuzz.generate.reduce import without_layers
from fuzz.generate.spec import NetSpec
from fuzz.registry.issue import KnownIssue, installed_thunder
from fuzz.registry.triggers import (
    ATTENTION_KINDS,
    EXPLOSIVE,
    INPLACE_WRONG,
    applies,
    applies_gelu,
    applies_sigmoid,
    as_linear,
    dropout_in_compiled_checkpoint,
    dropout_layer_in_compiled_checkpoint,
    float_tensor_args,
    in_compiled_checkpoint,
    inplace_activation_after_narrow,
    ints,
    is_inplace_silu,
    layer_issue,
    masks_a_whole_row,
    op_layer,
    stride,
    thunder_runs_it,
    view_update,
)

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


KNOWN_ISSUES += (
    layer_issue(
        "inplace-update-in-checkpoint-wrong-grad",
        "in-place updates inside a checkpointed function (y = linear(x); y += x; y.mul_(0.5)) are wrong under "
        "thunderfx: the y.mul_(0.5) is lost, so the output (when used after the checkpoint) and the gradients are "
        "2x eager's; correct without the checkpoint; the same with the stock converter",
        ("forward-divergence", "gradient-divergence"),
        lambda spec, i: spec.layers[i].kind == "inplace_residual" and in_compiled_checkpoint(spec, i),
    ),
    layer_issue(
        "inplace-silu-wrong-grad",
        "nn.SiLU(inplace=True) after a Linear gives wrong gradients for the input and the Linear's parameters "
        "under thunderfx (~10% off, up to 3x per element): always outside checkpoints; inside a checkpoint when "
        "more ops follow it there (e.g. GELU, SwiGLU); not checkpoint-specific",
        ("gradient-divergence",),
        is_inplace_silu,
        as_linear(is_inplace_silu),
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
            dropout_in_compiled_checkpoint(spec)
            or any(dropout_layer_in_compiled_checkpoint(spec, i) for i in range(len(spec.layers)))
        ),
        lambda spec: (
            replace(spec, model=replace(spec.model, dropout=0.0))
            if spec.model is not None
            else without_layers(
                spec, [i for i in range(len(spec.layers)) if dropout_layer_in_compiled_checkpoint(spec, i)]
            )
        ),
    ),
    layer_issue(
        "narrow-then-inplace-crash",
        "Tensor.narrow (which thunderfx sends to its fallback) followed later by an in-place activation "
        "(nn.ReLU/SiLU(inplace=True) after a Linear) crashes thunderfx: 'RuntimeError: Attempting to reshape "
        "a.shape=(1, 2) to shape=(1, 1)'; with or without checkpoints (thunder-general)",
        ("thunder-crash",),
        inplace_activation_after_narrow,
        as_linear(inplace_activation_after_narrow),
    ),
)


# Found by the op sweep (thunder's OpInfo samples through thunderfx inside one checkpoint).
KNOWN_ISSUES += (
    layer_issue(
        "binary-op-zero-dim-tensor-crash",
        "a binary op (add, sub, mul, div, true_divide, atan2, maximum, minimum) of a (4, 4) tensor and a 0-dim tensor "
        "that requires grad crashes thunderfx in every call form: 'RuntimeError: shape [1] is invalid for input of "
        "size 16'; with or without checkpoints (thunder-general)",
        ("thunder-crash",),
        op_layer(
            ("add", "sub", "mul", "true_divide", "div", "atan2", "maximum", "minimum"),
            lambda p: any(a["tensor"] == [] for a in float_tensor_args(p)[1:]),
        ),
    ),
    layer_issue(
        "zero-gradient-output-loses-requires-grad",
        "the output of an op whose derivative is zero (ceil, floor, round, trunc, sign) or that is empty "
        "(repeat with a 0) does not require grad under thunderfx, where eager's does, so backward raises "
        "'element 0 of tensors does not require grad' (thunder-general)",
        ("thunder-crash",),
        lambda spec, i: (
            op_layer(("ceil", "floor", "round", "trunc", "sign"))(spec, i)
            or op_layer(("repeat",), lambda p: 0 in ints(p["args"][1:]))(spec, i)
        ),
    ),
    layer_issue(
        "expand-to-zero-size-crash",
        "Tensor.expand of a (1, 1) tensor to size (0, 0) crashes thunderfx: a bare AssertionError (thunder-general)",
        ("thunder-crash",),
        op_layer(("expand",), lambda p: 0 in ints(p["args"][1:])),
    ),
    layer_issue(
        "negative-pad-crash",
        "F.pad with negative padding (cropping) crashes thunderfx with a bare AssertionError (thunder-general)",
        ("thunder-crash",),
        op_layer(("torch_pad",), lambda p: any(i < 0 for i in ints([*p["args"][1:2], p["kwargs"].get("pad")]))),
    ),
    layer_issue(
        "index-add-inductor-lowering-crash",
        "index_add (function, method, in-place) is sent to thunderfx's inductor fallback, whose lowering of "
        "aten.index_put_ fails: 'InductorError: LoweringException: AssertionError' (thunder-general)",
        ("thunder-crash",),
        op_layer(("index_add",)),
    ),
    layer_issue(
        "nll-loss-unbatched-dtype-crash",
        "F.nll_loss of an unbatched (1-D) float32 input and a 0-dim target crashes thunderfx: 'RuntimeError: "
        "expected scalar type Float but found Double' (thunder-general)",
        ("thunder-crash",),
        op_layer(("nll_loss",), lambda p: len(float_tensor_args(p)[0]["tensor"]) == 1),
    ),
    layer_issue(
        "sdpa-fully-masked-row-nan",
        "F.scaled_dot_product_attention with a boolean attn_mask that masks a whole row: thunderfx's output and "
        "gradients hold NaN where eager's are finite (thunder-general)",
        ("forward-divergence", "gradient-divergence"),
        op_layer(
            ("scaled_dot_product_attention",),
            lambda p: any(masks_a_whole_row(a) for a in [*p["args"], *p["kwargs"].values()]),
        ),
    ),
    layer_issue(
        "inplace-op-on-clone-wrong-grad",
        "outside checkpoints, an in-place unary op on a clone of a computed tensor (`y.clone().abs_()`, sin_, "
        "cos_, log_, sqrt_, erf_, ... whose backward needs its input) gets a wrong gradient under thunderfx, "
        "silently (abs_: the sign of a weight's gradient flips): thunder differentiates with the mutated tensor; "
        "remainder_/fmod-like ops raise autograd's 'modified by an inplace operation' instead; correct inside a "
        "checkpoint (thunder-general)",
        ("gradient-divergence", "thunder-crash"),
        lambda spec, i: (
            spec.layers[i].params.get("form") == "inplace"
            and spec.layers[i].params["op"] in INPLACE_WRONG
            and not in_compiled_checkpoint(spec, i)
        ),
    ),
    layer_issue(
        "lerp-zero-dim-inductor-cpp-error",
        "torch.lerp of three 0-dim tensors inside a checkpoint: thunderfx sends the region to inductor, whose "
        "vectorized C++ kernel does not compile on CPU ('invalid cast from Vectorized<float> to float'); "
        "without the checkpoint thunder runs it (checkpoint-specific)",
        ("thunder-crash",),
        lambda spec, i: (
            spec.device == "cpu"
            and op_layer(("lerp",), lambda p: all(a["tensor"] == [] for a in float_tensor_args(p)))(spec, i)
            and in_compiled_checkpoint(spec, i)
        ),
    ),
    layer_issue(
        "max-pool-stride-none-crash",
        "F.max_pool3d (and its 1d/2d siblings) with stride=None (the documented default: the kernel size) crashes "
        "thunderfx: 'aten::max_pool3d_with_indices() Expected a value of type List[int] for argument stride but "
        "instead found type NoneType' (thunder-general; found by the nightly campaign's op sweep)",
        ("thunder-crash",),
        op_layer(("max_pool1d", "max_pool2d", "max_pool3d"), lambda p: stride(p) is None),
    ),
    layer_issue(
        "sigmoid-grad-nan-large-negative",
        "thunderfx's sigmoid gradient is NaN for inputs below about -90 (float32), where eager's is 0: "
        "torch.sigmoid(torch.tensor(-500.)) backward; reached when a sigmoid follows an op whose output grows "
        "large (sinh, exp, pow, ...) (thunder-general; found by the nightly campaign)",
        ("gradient-divergence",),
        # The trigger is the sigmoid (or the layer computing one) after an explosive op: the bug is the sigmoid's, and
        # taking it out must not take a new bug of the explosive op with it.
        lambda spec, i: (
            applies_sigmoid(spec.layers[i]) and any(layer.params.get("op") in EXPLOSIVE for layer in spec.layers[:i])
        ),
    ),
    layer_issue(
        "hardsigmoid-float64-grad-imprecise",
        "in float64, thunderfx's hardsigmoid gradient is off by ~2e-8 (float32 precision: a float32 1/6), where "
        "eager is exact (thunder-general)",
        ("gradient-divergence",),
        lambda spec, i: spec.dtype == "float64" and op_layer(("hardsigmoid",))(spec, i),
    ),
)

# Found by dev campaigns on thunder 0.2.6 (CPU); the accuracy entries: thunder is right in float32.
KNOWN_ISSUES += (
    layer_issue(
        "head-size-1-attention-autocast-stride-crash",
        "attention with one feature per head (features == heads >= 2), a batch of 2 or more, under "
        "torch.autocast(bfloat16) around the forward crashes thunderfx: 'AssertionError: expected size 2==2, "
        "stride 1==2 at dim=1; ... incorrect fake (aka meta) kernel' (Attention, TransformerBlock, litgpt's "
        "DecoderBlock alike; thunder-general)",
        ("thunder-crash",),
        lambda spec, i: (
            spec.layers[i].kind in ATTENTION_KINDS
            and spec.batch >= 2
            and spec.layers[i].params["heads"] == spec.widths()[i] >= 2
            and (spec.autocast == "forward" or (spec.autocast == "checkpoints" and spec.checkpointed(i)))
        ),
    ),
    layer_issue(
        "gelu-after-op-bfloat16-inaccurate",
        "a bfloat16 GELU that follows another op (log_softmax -> gelu, 52 features) loses precision under "
        "thunderfx: outputs of -0 where float64 gives -0.0026 (2 of 52 elements; 17x eager's error), while a "
        "lone bfloat16 gelu matches eager; right in float32 (accuracy, thunder-general)",
        ("accuracy",),
        lambda spec, i: spec.dtype == "bfloat16" and i > 0 and applies_gelu(spec.layers[i]),
    ),
    layer_issue(
        "attention-bfloat16-grad-inaccurate",
        "thunderfx's bfloat16 attention backward is far less accurate than eager's: causal Attention(7 heads) -> "
        "ReLU -> Linear -> Linear(-> 1), batch 4, sequence 3: the k weight gradient is 37% of the tensor's scale off "
        "(drift 0.92x; another seed: 2.9x the scale, 0.15x) while thunderfx is right in float32; float16 and "
        "F.scaled_dot_product_attention alike. Beyond an accuracy gap's bound (docs/oracle.md): a wrong result in "
        "low precision, matched by its band (thunder-general)",
        ("accuracy", "gradient-divergence"),
        lambda spec, i: (
            spec.dtype in ("bfloat16", "float16")
            and (spec.layers[i].kind in ATTENTION_KINDS or op_layer(("scaled_dot_product_attention",))(spec, i))
        ),
    ),
    layer_issue(
        "mish-bfloat16-grad-inaccurate",
        "thunderfx's bfloat16 mish backward drifts: mish -> elu -> Mish -> Mish (an embedding input, 57 features) "
        "gives an embedding-weight gradient ~0.976x float64 (4.2x eager's error; in another network 0.994x, 8.7x), "
        "while thunderfx is right in float32 (accuracy, thunder-general; found by the injection matrix's draws)",
        ("accuracy",),
        lambda spec, i: spec.dtype == "bfloat16" and applies("mish")(spec.layers[i]),
    ),
    layer_issue(
        "max-dim-tie-grad-split",
        "torch.max(x, dim) where x holds ties (relu -> .to -> RMSNorm -> max(dim=0), float32): eager sends the "
        "whole gradient to the index max returns, thunderfx splits it among the tied elements (as amax does), so "
        "a weight's gradient differs (thunder-general; found by the injection matrix's draws)",
        ("gradient-divergence",),
        op_layer(("torch_max",), lambda p: len(p["args"]) > 1 or "dim" in p["kwargs"]),
    ),
    layer_issue(
        "softmax-bfloat16-grad-inaccurate",
        "thunderfx's bfloat16 softmax backward is less accurate than eager's: torch.softmax(x, dim=1) of a (2, 2) "
        "tensor, one input-gradient element 0.0518 where float64 gives 0.0743 (30% of the tensor's scale, 16x "
        "eager's error), while thunderfx is right in float32: beyond an accuracy gap's bound (docs/oracle.md), a "
        "wrong result in low precision, matched by its band (thunder-general; found by the verdict-trust campaign)",
        ("accuracy", "gradient-divergence"),
        lambda spec, i: spec.dtype == "bfloat16" and applies("softmax")(spec.layers[i]),
    ),
)


# Found by the mutation family (issue 14) on thunder 0.2.6 (CPU); measured over every view x update x read
# (features 4, batch 3, float32): outside checkpoints add_ then a read of the base is right (but for a narrow that
# another layer follows: narrow-add-then-next-layer-grad-broken, found later); inside checkpoints
# every view but narrow fails (thunderfx sends narrow's regions to its inductor fallback, which is right).
KNOWN_ISSUES += (
    layer_issue(
        "inplace-view-then-view-read-crash",
        "an in-place update through a view followed by a read of that view (y = x * 2; v = y[0]; v.add_(0.5); "
        "y + v.sum()) crashes thunderfx for select, slice, view, transpose, diagonal ('RuntimeError: expand: the "
        "requested shape has too few dimensions!', 'expand: attempting to expand a dimension of length 4!') and "
        "narrow ('Attempting to reshape a.shape=(3, 1) to shape=(3, 4)'), or silently gives another output or input "
        "gradient (unsqueeze); inside a checkpoint narrow falls back to inductor, which is right (thunder-general)",
        ("thunder-crash", "forward-divergence", "gradient-divergence"),
        view_update(lambda p, checkpointed: p["read"] == "view" and not (checkpointed and p["view"] == "narrow")),
    ),
    layer_issue(
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
            view_update(
                lambda p, checkpointed: (
                    not checkpointed and p["read"] == "base" and p["update"] != "add_" and p["view"] != "diagonal"
                )
            )(spec, i)
            and (spec.layers[i].kind == "view_update" or spec.vocab is not None)
        ),
    ),
    layer_issue(
        "diagonal-inplace-update-lost",
        "an in-place update through y.diagonal(dim1=0, dim2=1) is lost from thunderfx's output (y = x * 2; "
        "y.diagonal(0, 1).add_(0.5): the diagonal is 0.5 lower than eager's), every update alike; inside a "
        "checkpoint thunderfx crashes with a bare AssertionError instead (thunder-general)",
        ("forward-divergence", "gradient-divergence", "thunder-crash"),
        view_update(lambda p, checkpointed: p["view"] == "diagonal" and p["read"] == "base"),
    ),
    layer_issue(
        "inplace-view-in-checkpoint-crash",
        "inside a checkpointed function thunder runs no in-place update through a view: y = x * 2; y[0].add_(0.5); "
        "return y crashes thunderfx with 'RuntimeError: a leaf Variable that requires grad is being used in an "
        "in-place operation.' (AssertionError for relu_), for select, indexing, slices, view, reshape, transpose, "
        "unsqueeze, method and function forms alike, or, on other shapes, silently loses the update from the output "
        "(an image input of 7: every element 1.0 off); narrow only escapes because its region falls back to "
        "inductor; add_ is right without the checkpoint (checkpoint-specific for add_, thunder-general for the "
        "updates thunder gets wrong outside checkpoints too)",
        ("thunder-crash", "forward-divergence", "gradient-divergence"),
        view_update(
            lambda p, checkpointed: checkpointed and p["read"] == "base" and p["view"] not in ("narrow", "diagonal")
        ),
    ),
    layer_issue(
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
            and view_update(
                lambda p, checkpointed: (
                    not checkpointed
                    and p.get("on") in ("product", "clone")
                    and (p["view"], p["update"], p["read"]) == ("narrow", "add_", "base")
                )
            )(spec, i)
        ),
    ),
    layer_issue(
        "buffer-update-in-checkpoint-lost",
        "inside a checkpointed function, an in-place update of a buffer under torch.no_grad() (an EMA: "
        "self.mean.mul_(0.9).add_(0.1 * x.mean())) is not applied by thunderfx: the buffer keeps its old value after "
        "forward and after backward, where eager updates it; on other shapes (an image input of 1 element, "
        "float16/bfloat16, or through checkpoint_wrapper) thunderfx crashes instead with 'UnboundLocalError: cannot "
        "access local variable 't54' where it is not associated with a value'; right outside checkpoints, and "
        "BatchNorm's running statistics are right inside them (checkpoint-specific)",
        ("state-divergence", "thunder-crash"),
        lambda spec, i: spec.layers[i].kind == "buffer_update" and in_compiled_checkpoint(spec, i),
    ),
    layer_issue(
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
            and thunder_runs_it(spec)
        ),
    ),
)


def known_issues_for(spec: NetSpec) -> list[KnownIssue]:
    """The known issues whose predicate accepts ``spec`` and that are expected on the installed thunder (a failure
    of an entry fixed in this version is a regression, reported as new)."""
    return [issue for issue in KNOWN_ISSUES if issue.applies(spec) and issue.expected_on(installed_thunder())]
