"""The ``run(model, fn)`` of an upstream.py (`fuzz.report.upstream`): one forward and backward, training steps, or a
program of several inputs, returning what its check compares."""

from __future__ import annotations

from fuzz.generate.program_source import input_arguments
from fuzz.generate.spec import NetSpec
from fuzz.model_builder import cotangent_expression, input_expression, step_shapes

# What a training spec's optimizer is, as code (`fuzz.run.passes.OPTIMIZERS`).
_OPTIMIZERS = {
    "sgd": "torch.optim.SGD(list(model.parameters()) or [torch.zeros(0)], lr=1e-2, momentum=0.9)",
    "adamw": "torch.optim.AdamW(list(model.parameters()) or [torch.zeros(0)], lr=1e-3, weight_decay=1e-2)",
}
# What training steps leave to compare: the last output and input gradient, the parameters and the buffers.
_TRAINED = "    return [out, x_.grad, *(p.detach() for p in model.parameters()), *(b.clone() for b in model.buffers())]"


# A program of several inputs (`fuzz.generate.program_source.input_lines`): ``x`` is the tuple of them, each run on
# fresh copies of it (an input that views another viewing its copy), its inputs after the call and whether each
# (and the output) requires grad compared as state.
_FRESH = [
    "def fresh(inputs, dtype=None):  # copies; an input that views another views its copy",
    "    c = {id(t): t.detach().to(dtype).clone().requires_grad_(t.requires_grad) for t in inputs if t._base is None}",
    "    return [c[id(t)] if t._base is None else c[id(t._base)].as_strided(t.size(), t.stride(), t.storage_offset())"
    " for t in inputs]",
]
_RUN_ON_INPUTS = [
    *_FRESH,
    "def run(model, fn):",
    "    xs = fresh(x)",
    "    out = fn(*xs)",
    "    state = [*(t.detach().clone() for t in xs), *(t.requires_grad for t in xs), out.requires_grad]",
    "    out.backward(cotangent)",
    "    return [out, *(t.grad if t.is_leaf else None for t in xs), *(p.grad for p in model.parameters()), *state]",
]


def run_function(spec: NetSpec, state: bool) -> list[str]:
    """``run(model, fn)``: ``fn`` (``model`` itself or thunderfx of it) forward and backward, each training step with
    its optimizer; returns what is compared: the output, the input's gradient, the parameters' gradients (after
    training: the parameters) and the buffers."""
    if input_arguments(spec):
        return _RUN_ON_INPUTS
    if spec.training is None:
        return [
            "def run(model, fn):",
            "    x_ = x.detach().requires_grad_(x.requires_grad)",
            *(["    torch.manual_seed(0)  # the same random numbers in each run"] if spec.random else []),
            *(
                [
                    "    out = fn(x_)",
                    "    buffers = [b.clone() for b in model.buffers()]  # after forward",
                    "    out.backward(cotangent)",
                    "    return [out, x_.grad, *(p.grad for p in model.parameters()), *buffers]",
                ]
                if state
                else [
                    "    (out := fn(x_)).backward(cotangent)",
                    "    return [out, x_.grad, *(p.grad for p in model.parameters())]",
                ]
            ),
        ]
    optimizer = f"    optimizer = {_OPTIMIZERS[spec.training.optimizer]}"
    if not spec.random:  # each step's batch drawn here, as the harness draws it (the first one is the example's)
        literal = {"DEVICE": repr(spec.device), "DTYPE": f"torch.{spec.dtype}"}
        make_input, make_cotangent = input_expression(spec, "shape"), cotangent_expression(spec, "out_shape")
        for name, value in literal.items():
            make_input, make_cotangent = make_input.replace(name, value), make_cotangent.replace(name, value)
        return [
            "def run(model, fn):",
            optimizer,
            f"    for step, (shape, out_shape) in enumerate({step_shapes(spec)}):",
            f"        generator = torch.Generator().manual_seed({spec.seed} + step)",
            f"        x_, cotangent_ = {make_input}, {make_cotangent}",
            "        optimizer.zero_grad()",
            "        (out := fn(x_)).backward(cotangent_)",
            "        optimizer.step()",
            _TRAINED,
        ]
    return [
        "def run(model, fn):",
        optimizer,
        "    for x_, cotangent_ in [(x, cotangent), *make_batches()]:",
        "        x_ = x_.detach().requires_grad_(x_.requires_grad)",
        *(["        torch.manual_seed(0)  # the same random numbers in each run"] if spec.random else []),
        "        optimizer.zero_grad()",
        "        (out := fn(x_)).backward(cotangent_)",
        "        optimizer.step()",
        _TRAINED,
    ]
