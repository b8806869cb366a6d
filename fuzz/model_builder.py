"""`NetSpec` -> plain-torch source -> `nn.Module`, input and cotangent.

The network is always built by executing its generated source, so the module the harness
tests and the one a repro.py rebuilds are the same code. Everything is deterministic in the
spec's seed.
"""

from __future__ import annotations

import hashlib
import inspect
import linecache
import types
from dataclasses import dataclass, field, replace

import torch
from torch import nn

from fuzz.generate import blocks
from fuzz.generate.layers import LAYER_KINDS
from fuzz.generate.program_source import input_lines, program_forward_and_methods
from fuzz.generate.source_calls import INDENT, applied, call, checkpoint_kwargs, checkpoint_options, method
from fuzz.generate.spec import CheckpointSpec, NetSpec
from fuzz.generate.spec_parts import AUTOCAST_DTYPE
from fuzz.generate.zoo import model_source

_IMPORTS = """\
import functools

import torch
import torch.nn.functional as F
from torch import nn
from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import (
    CheckpointImpl,
    apply_activation_checkpointing,
    checkpoint_wrapper,
)
from torch.utils.checkpoint import (
    CheckpointPolicy,
    checkpoint,
    checkpoint_sequential,
    create_selective_checkpoint_contexts,
)
"""

_SELECTIVE_POLICY = '''

def save_matmuls(ctx, op, *args, **kwargs):
    """Selective-checkpointing policy: keep matmul outputs, recompute everything else."""
    if op in (torch.ops.aten.mm.default, torch.ops.aten.addmm.default, torch.ops.aten.bmm.default):
        return CheckpointPolicy.MUST_SAVE
    return CheckpointPolicy.PREFER_RECOMPUTE
'''


@dataclass
class TrainingSteps:
    """A spec's training steps (`fuzz.generate.spec.TrainingSpec`) as built: the optimizer's name and each step's
    (input, cotangent) after the first; ``starts``: where eager's own steps leave the parameters and buffers before
    each step, which `fuzz.run.runner` computes once, on first use."""

    optimizer: str
    batches: list[tuple[torch.Tensor, torch.Tensor]]
    starts: list[dict[str, torch.Tensor]] | None = field(default=None, compare=False, repr=False)


@dataclass
class Example:
    """A built network with its input (float features or integer tokens; a program's several inputs: a tuple,
    `fuzz.run.passes.call_on`) and the cotangent for its backward;
    ``training``: the later training steps of a spec that trains (None: one forward and backward)."""

    net: nn.Module
    input: torch.Tensor | tuple[torch.Tensor, ...]
    cotangent: torch.Tensor
    training: TrainingSteps | None = None


def _helper_sources(spec: NetSpec) -> str:
    helpers = dict.fromkeys(helper for layer in spec.layers for helper in LAYER_KINDS[layer.kind].helpers)
    return "".join("\n\n" + inspect.getsource(getattr(blocks, helper)) for helper in helpers)


def _callable(spec: NetSpec, index: int) -> str:
    """Layer ``index`` as a callable (for checkpoint_sequential's list)."""
    kind = LAYER_KINDS[spec.layers[index].kind]
    return f"lambda x: {applied(spec, index)}" if kind.functional or kind.apply else f"self.layer{index}"


def _autocast(body: list[str]) -> list[str]:
    """``body`` inside an autocast region (to `AUTOCAST_DTYPE`)."""
    return [f"with torch.autocast(DEVICE, dtype=torch.{AUTOCAST_DTYPE}):", *(INDENT + line for line in body)]


def _checkpointed_call(
    spec: NetSpec, number: int, ckpt: CheckpointSpec, checkpointing: bool
) -> tuple[list[str], list[str]]:
    """Source lines of the methods a "checkpoint" api segment needs, and of its call in ``forward``.

    Without ``checkpointing`` only the methods that differ from the checkpointing ones are returned.
    """
    name = f"self.checkpointed{number}"
    body = [f"x = {applied(spec, i)}" for i in range(ckpt.start, ckpt.stop)]
    inner: list[str] = []
    if ckpt.nested:
        outer, inner = (body[:1], body[1:]) if len(body) > 1 else ([], body)
        inner_ckpt = CheckpointSpec(0, 1, use_reentrant=ckpt.use_reentrant)
        body = [*outer, f"x = {call(f'{name}_inner', 'x', inner_ckpt, checkpointing)}"]
    if spec.autocast == "checkpoints":  # back to the input's dtype, as code that autocasts one block does
        body = ["dtype = x.dtype", *_autocast(body), "x = x.to(dtype)"]
    signature, arguments = "x", "x"
    if ckpt.extra_args:
        signature, arguments = "x, scale, *, shift", "x, 0.5, shift=x.mean(dim=-1, keepdim=True)"
        body = ["x = x * scale + shift", *body]
    returns, target, after = "x", "x", []
    if ckpt.multi_output:
        returns, target, after = "x, x.mean(dim=-1, keepdim=True)", "x, aux", ["x = x + aux"]
    methods = method(f"checkpointed{number}", body, signature, returns) if checkpointing or ckpt.nested else []
    if checkpointing and ckpt.nested:
        methods = method(f"checkpointed{number}_inner", inner) + methods
    return methods, [f"{target} = {call(name, arguments, ckpt, checkpointing)}", *after]


def _forward_and_methods(spec: NetSpec, checkpointing: bool) -> list[str]:
    """Source lines of the checkpointed-body methods, then of ``forward`` (see `_checkpointed_call`)."""
    if spec.is_program:
        return program_forward_and_methods(spec, checkpointing)
    segments = {c.start: (i, c) for i, c in enumerate(spec.checkpoints)}
    methods: list[str] = []
    forward = ["x = self.embed(x)"] if spec.vocab is not None else []
    index = 0
    while index < len(spec.layers):
        number, ckpt = segments.get(index, (None, None))
        if ckpt is None or ckpt.api == "wrapper":  # a wrapped layer is called like any other
            forward.append(f"x = {applied(spec, index)}")
            index += 1
            continue
        span = range(ckpt.start, ckpt.stop)
        if ckpt.api == "sequential" and checkpointing:
            functions = ", ".join(_callable(spec, i) for i in span)
            forward.append(f"x = checkpoint_sequential([{functions}], {ckpt.segments}, x, {checkpoint_options(ckpt)})")
        elif ckpt.api == "sequential":
            forward += [f"x = {applied(spec, i)}" for i in span]
        else:
            body_methods, call = _checkpointed_call(spec, number, ckpt, checkpointing)
            methods += body_methods
            forward += call
        index = ckpt.stop
    if spec.autocast == "forward":
        forward = _autocast(forward)
    return methods + ["def forward(self, x):", *(INDENT + line for line in forward), f"{INDENT}return x"]


def _init_lines(spec: NetSpec) -> list[str]:
    widths = spec.widths()
    lines = ["def __init__(self):", f"{INDENT}super().__init__()"]
    if spec.vocab is not None:
        lines.append(f"{INDENT}self.embed = nn.Embedding({spec.vocab}, {spec.features})")
    for i, layer in enumerate(spec.layers):
        kind = LAYER_KINDS[layer.kind]
        if not kind.functional:
            lines.append(f"{INDENT}self.layer{i} = {kind.source(layer.params, widths[i])}")
        if layer.frozen:
            lines.append(f"{INDENT}self.layer{i}.requires_grad_(False)")
    return lines


def _wrapping_lines(spec: NetSpec) -> list[str]:
    """``make_example`` lines wrapping each "wrapper" layer with checkpoint_wrapper, as thunder's own test does."""
    wrapped = [c for c in spec.checkpoints if c.api == "wrapper"]
    lines = [f"targets = [{', '.join(f'net.layer{c.start}' for c in wrapped)}]"] if wrapped else []
    for number, ckpt in enumerate(wrapped):
        impl = "REENTRANT" if ckpt.use_reentrant else "NO_REENTRANT"
        kwargs = ", ".join([f"checkpoint_impl=CheckpointImpl.{impl}", *checkpoint_kwargs(ckpt)])
        lines.append(
            f"apply_activation_checkpointing(net, checkpoint_wrapper_fn=functools.partial(checkpoint_wrapper, "
            f"{kwargs}), check_fn=lambda m: m is targets[{number}])"
        )
    return lines


def _class_body(lines: list[str]) -> str:
    return "\n".join(INDENT + line if line else "" for line in lines)


def _layer_classes(spec: NetSpec) -> str:
    """``Net`` and ``PlainNet`` of a layer stack, after the helpers and the selective policy they use."""
    body = _class_body([*_init_lines(spec), "", *_forward_and_methods(spec, checkpointing=True)])
    plain_body = _class_body(_forward_and_methods(spec, checkpointing=False))
    policy = _SELECTIVE_POLICY if any(c.selective for c in spec.checkpoints) else ""
    return f'''{_helper_sources(spec)}{policy}

class Net(nn.Module):
{body}


class PlainNet(Net):
    """``Net`` without its checkpoints: the checkpointed functions are called directly."""

{plain_body}

'''


def network_source(spec: NetSpec) -> str:
    """Standalone Python source for ``spec``: ``Net``, ``PlainNet`` and ``make_example``.

    ``PlainNet`` is ``Net`` with every checkpoint call replaced by a direct call (same modules,
    same parameters, same functions). ``make_example(checkpointing=True)`` returns the network
    (``Net``, or ``PlainNet`` without checkpointing), its input and its cotangent; a spec that trains also defines
    ``OPTIMIZER`` and ``make_batches()`` (`_training_source`).
    """
    imports, classes = model_source(spec) if spec.model is not None else ("", _layer_classes(spec))
    wrapping = "".join(f"\n{INDENT * 2}{line}" for line in _wrapping_lines(spec))
    if wrapping:
        wrapping = f"\n{INDENT}if checkpointing:{wrapping}"
    shape = spec.input_shape if spec.vocab is None else spec.input_shape[:-1]
    return f'''{_IMPORTS}{imports}{classes}

SEED = {spec.seed}
DTYPE = torch.{spec.dtype}
DEVICE = {spec.device!r}
INPUT_SHAPE = {shape}
OUTPUT_SHAPE = {spec.output_shape}


def make_example(checkpointing=True):
    """The network (``PlainNet`` without checkpointing), its input and the backward cotangent, drawn from SEED."""
    torch.manual_seed(SEED)
    net = (Net if checkpointing else PlainNet)().to(device=DEVICE, dtype=DTYPE){wrapping}
    generator = torch.Generator().manual_seed(SEED)
    x = {input_expression(spec, "INPUT_SHAPE")}{"".join(f"{chr(10)}{INDENT}{line}" for line in input_lines(spec))}
    cotangent = {cotangent_expression(spec, "OUTPUT_SHAPE")}
    return net, x, cotangent
{_training_source(spec)}'''


def step_shapes(spec: NetSpec) -> list[tuple[tuple[int, ...], tuple[int, ...]]]:
    """Each training step's input and cotangent shapes, the first step's those of the example."""
    batches = spec.training.batches or [spec.batch] * spec.training.steps
    rest = spec.input_shape[1:] if spec.vocab is None else spec.input_shape[1:-1]  # (tokens: no embedding features)
    return [((batch, *rest), replace(spec, batch=batch, training=None).output_shape) for batch in batches]


def input_expression(spec: NetSpec, shape: str) -> str:
    """The expression of an input of shape ``shape`` (a name) drawn from ``generator``."""
    ones = spec.inputs == "ones"
    if spec.vocab is None:
        make_input = f"torch.ones({shape})" if ones else f"torch.randn({shape}, generator=generator)"
        return make_input + f".to(device=DEVICE, dtype=DTYPE).requires_grad_({spec.input_requires_grad})"
    return (
        f"torch.ones({shape}, dtype=torch.int64)"
        if ones
        else f"torch.randint({spec.vocab}, {shape}, generator=generator)"
    ) + ".to(DEVICE)"


def cotangent_expression(spec: NetSpec, shape: str) -> str:
    """The expression of a cotangent of shape ``shape`` (a name) drawn from ``generator``."""
    make = f"torch.ones({shape})" if spec.inputs == "ones" else f"torch.randn({shape}, generator=generator)"
    return make + ".to(device=DEVICE, dtype=DTYPE)"


def _training_source(spec: NetSpec) -> str:
    """For a spec with training steps, ``OPTIMIZER`` and ``make_batches()``, each later step's input and cotangent."""
    if spec.training is None:
        return ""
    shapes = step_shapes(spec)
    batches, output_shapes = [shape[0] for shape, _ in shapes], [output for _, output in shapes]
    return f'''

OPTIMIZER = {spec.training.optimizer!r}
BATCHES = {batches}
OUTPUT_SHAPES = {output_shapes}


def make_batches():
    """Each training step's after the first: its input and cotangent, BATCHES[step] examples drawn from SEED + step."""
    batches = []
    for step in range(1, len(BATCHES)):
        generator = torch.Generator().manual_seed(SEED + step)
        input_shape, output_shape = (BATCHES[step], *INPUT_SHAPE[1:]), OUTPUT_SHAPES[step]
        x = {input_expression(spec, "input_shape")}
        batches.append((x, {cotangent_expression(spec, "output_shape")}))
    return batches
'''


def build_example(spec: NetSpec, checkpointing: bool = True, module: types.ModuleType | None = None) -> Example:
    """Execute ``network_source(spec)`` (in ``module``, when given: its code then names that module, which dynamo can
    import once it is in ``sys.modules``); return ``make_example(checkpointing)``'s network, input and cotangent."""
    source = network_source(spec)
    # A distinct, registered file name per source keeps tracebacks and dynamo's messages readable.
    filename = f"<fuzz-net-{hashlib.sha1(source.encode()).hexdigest()[:12]}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(keepends=True), filename)
    namespace: dict = module.__dict__ if module is not None else {"__name__": "fuzz_generated_net"}
    exec(compile(source, filename, "exec"), namespace)
    example = Example(*namespace["make_example"](checkpointing))
    if spec.training is not None:
        example.training = TrainingSteps(namespace["OPTIMIZER"], namespace["make_batches"]())
    return example
