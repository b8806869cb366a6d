"""A program's source (`fuzz.generate.program`): each layer on the values it reads, grad-mode regions as ``with``
blocks, each checkpoint a method of the values it takes; `program_forward_and_methods` is what `fuzz.model_builder`
writes into ``Net`` and ``PlainNet``."""

from __future__ import annotations

import io
import itertools
import re
import tokenize

from fuzz.generate import program
from fuzz.generate.layers import LAYER_KINDS
from fuzz.generate.source_calls import INDENT, applied, call, method
from fuzz.generate.spec import NetSpec
from fuzz.generate.spec_parts import AUTOCAST_DTYPE


def _on(expression: str, names: list[str]) -> str:
    """``expression`` of ``x`` (and ``y``) with those names (not attributes or keywords) replaced by ``names``."""
    tokens = list(tokenize.generate_tokens(io.StringIO(expression).readline))
    spans = [
        (token.start[1], token.end[1], names[token.string == "y"])
        for before, token, after in zip([None, *tokens[:-1]], tokens, [*tokens[1:], None], strict=True)
        if token.type == tokenize.NAME
        and token.string in ("x", "y")[: len(names)]
        and not (before is not None and before.string == ".")
        and not (after is not None and after.string == "=")
    ]
    for start, end, name in reversed(spans):
        expression = expression[:start] + name + expression[end:]
    return expression


# The ``with`` statement of each grad mode of a program's layers (`fuzz.generate.spec_parts.GRAD_MODES`).
_GRAD_MODE_BLOCKS = {
    "no_grad": "torch.no_grad()",
    "enable_grad": "torch.enable_grad()",
    "inference_mode": "torch.inference_mode()",
    "autocast": f"torch.autocast(DEVICE, dtype=torch.{AUTOCAST_DTYPE})",
}
# What a grad-mode block's values become after it, as code that uses them later must write it: an inference tensor
# cloned (eager rejects saving one for backward, or updating it, outside inference mode), an autocast value a later
# layer reads cast back to the dtype of what entered the block (as a block autocast over part of a forward hands its
# values on; the network's dtype, float64 in the oracle's reference run). An autocast value only returned keeps
# autocast's dtype, and the other outputs are joined to it in that dtype (`_joined`): the output's dtype shows whether
# thunder computed the block under autocast (the oracle compares dtypes; by value a block computed in float32 is
# closer to the float64 truth, not further).
_AFTER_BLOCK = {"inference_mode": "{name}.clone()", "autocast": "{name}.to({entered}.dtype)"}


def _node_lines(spec: NetSpec, span: range) -> list[str]:
    """``v{k+1} = ...``: program layers ``span``, each on the values it reads; consecutive layers under one grad mode
    in one ``with`` block (`fuzz.generate.program.grad_blocks`)."""
    blocks, lines = program.grad_blocks(spec.layers, spec.checkpoints), []
    for block, run in itertools.groupby(span, key=lambda i: blocks[i]):
        indexes = list(run)
        body = [line for i in indexes for line in _node(spec, i)]
        if block is None:
            lines += body
            continue
        mode = spec.layers[block].grad_mode
        lines += [f"with {_GRAD_MODE_BLOCKS[mode]}:", *(INDENT + line for line in body)]
        if mode in _AFTER_BLOCK:
            entered = f"v{program.reads_of(spec.layers[indexes[0]], indexes[0])[0]}"
            after = [i for i in indexes if mode != "autocast" or program.read_after(spec.layers, i + 1, indexes[-1])]
            lines += [f"v{i + 1} = {_AFTER_BLOCK[mode].format(name=f'v{i + 1}', entered=entered)}" for i in after]
    return lines


def _node(spec: NetSpec, index: int) -> list[str]:
    """Layer ``index`` on the values it reads, as ``v{index+1} = ...``: an input none (it is an argument,
    `input_arguments`), an indexed assignment its statement, then the value it updated."""
    names = [f"v{read}" for read in program.reads_of(spec.layers[index], index)]
    flow = LAYER_KINDS[spec.layers[index].kind].flow
    if flow is not None and flow.input:  # an argument of forward, already named so
        return []
    if flow is not None and flow.statement:
        return [_on(applied(spec, index), names), f"v{index + 1} = {names[0]}"]
    return [f"v{index + 1} = {_on(applied(spec, index), names)}"]


def input_arguments(spec: NetSpec) -> list[str]:
    """The names of a program's inputs beyond ``x``, its forward's further arguments: ``v{k}`` for input value k."""
    return [f"v{value}" for value in program.further_inputs(spec.layers)]


def input_lines(spec: NetSpec) -> list[str]:
    """``make_example``'s lines making a program's further inputs from ``generator`` after ``x``, then ``x`` the tuple
    of all of them (none for a program of one input): a ``state_input`` drawn like ``x``, an ``input_view`` a column
    slice of the input it reads."""
    inputs = program.further_inputs(spec.layers)
    if not inputs:
        return []
    made = program.values(spec.layers, spec.checkpoints, spec._input())
    lines = []
    for value in inputs:
        layer = spec.layers[value - 1]
        if layer.kind == "input_view":
            read = layer.reads[0]
            columns = f"{layer.params['start']}:{layer.params['start'] + layer.params['length']}"
            lines.append(f"v{value} = {f'v{read}' if read else 'x'}[:, {columns}]")
            continue
        shape = (made[value].shape.batch, layer.params["width"])
        draw = f"torch.ones({shape})" if spec.inputs == "ones" else f"torch.randn({shape}, generator=generator)"
        requires_grad = layer.params["requires_grad"]
        lines.append(f"v{value} = {draw}.to(device=DEVICE, dtype=DTYPE).requires_grad_({requires_grad})")
    return [*lines, f"x = (x, {', '.join(input_arguments(spec))})"]


def _with_scale(lines: list[str]) -> list[str]:
    """``lines`` after ``scale = 0.5`` when they use it (the float a region that takes one is passed)."""
    return ["scale = 0.5", *lines] if any(re.search(r"\bscale\b", line) for line in lines) else lines


def _names(values: list[int]) -> str:
    return ", ".join(f"v{value}" for value in values)


def program_forward_and_methods(spec: NetSpec, checkpointing: bool) -> list[str]:
    """A program's region methods (with ``checkpointing``), then its ``forward``: each layer on the values it reads,
    each checkpoint a call of its region's method on the values it takes."""
    methods: list[str] = []
    forward = ["v0 = x"]
    index, regions = 0, {c.start: (i, c) for i, c in enumerate(spec.checkpoints)}
    while index < len(spec.layers):
        number, ckpt = regions.get(index, (None, None))
        if ckpt is None:
            stop = min([start for start in regions if start > index], default=len(spec.layers))
            forward += _node_lines(spec, range(index, stop))
            index = stop
            continue
        inputs, outputs = program.region_inputs(spec, number), program.region_outputs(spec, number)
        body = _node_lines(spec, range(ckpt.start, ckpt.stop))
        signature, arguments = _names(inputs), _names(inputs)
        if ckpt.extra_args:
            signature, arguments = f"{signature}, scale", f"{arguments}, 0.5"
        else:
            body = _with_scale(body)
        if checkpointing:
            methods += method(f"region{number}", body, signature, _names(outputs))
        forward.append(f"{_names(outputs)} = {call(f'self.region{number}', arguments, ckpt, checkpointing)}")
        index = ckpt.stop
    signature = ", ".join(["x", *input_arguments(spec)])
    return methods + method("forward", _with_scale(forward), signature, returns=_joined(spec))


def _autocast_dtype_kept(spec: NetSpec, value: int) -> bool:
    """Whether ``value`` keeps autocast's dtype where it is returned: an autocast block made it and nothing after the
    block reads it (what is read after is cast back, `_AFTER_BLOCK`)."""
    if value == 0 or spec.layers[value - 1].grad_mode != "autocast":
        return False
    blocks = program.grad_blocks(spec.layers, spec.checkpoints)
    last = max(i for i, block in enumerate(blocks) if block == blocks[value - 1])
    return not program.read_after(spec.layers, value, last)


def _joined(spec: NetSpec) -> str:
    """The network's one output: its outputs flattened and concatenated; where one keeps autocast's dtype, the others
    cast to its dtype first (as dynamo traces it, a constant: a thunder that computed that value in float32 returns
    float32, eager autocast's dtype; torch.cat would promote a mix to float32 either way)."""
    outputs = program.outputs_of(spec)
    kept = [value for value in outputs if _autocast_dtype_kept(spec, value)]
    flat = [
        f"v{value}.reshape(-1)" + (f".to(v{kept[0]}.dtype)" if kept and value not in kept else "") for value in outputs
    ]
    return flat[0] if len(flat) == 1 else f"torch.cat([{', '.join(flat)}])"
