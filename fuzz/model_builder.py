"""`NetSpec` -> plain-torch source -> `nn.Module`, input and cotangent.

The network is always built by executing its generated source, so the module the harness
tests and the one a repro.py rebuilds are the same code. Everything is deterministic in the
spec's seed.
"""

from __future__ import annotations

import hashlib
import inspect
import linecache
from dataclasses import dataclass

import torch
from torch import nn

from fuzz.layers import LAYER_KINDS
from fuzz.spec import NetSpec

_INDENT = "    "


@dataclass
class Example:
    """A built network with its input (requiring grad) and the cotangent for its backward."""

    net: nn.Module
    input: torch.Tensor
    cotangent: torch.Tensor


def _helper_sources(spec: NetSpec) -> list[str]:
    helpers = dict.fromkeys(helper for layer in spec.layers for helper in LAYER_KINDS[layer.kind].helpers)
    return [inspect.getsource(helper) for helper in helpers]


def _forward_lines(spec: NetSpec) -> list[str]:
    """Body lines of ``forward`` and of one method per checkpointed segment, in class order."""
    segments = {c.start: (i, c) for i, c in enumerate(spec.checkpoints)}
    methods, forward = [], ["def forward(self, x):"]
    index = 0
    while index < len(spec.layers):
        if index in segments:
            number, ckpt = segments[index]
            methods += [f"def checkpointed{number}(self, x):"]
            methods += [f"{_INDENT}x = self.layer{i}(x)" for i in range(ckpt.start, ckpt.stop)]
            methods += [f"{_INDENT}return x", ""]
            forward.append(f"{_INDENT}x = checkpoint(self.checkpointed{number}, x, use_reentrant={ckpt.use_reentrant})")
            index = ckpt.stop
        else:
            forward.append(f"{_INDENT}x = self.layer{index}(x)")
            index += 1
    return methods + forward + [f"{_INDENT}return x"]


def network_source(spec: NetSpec) -> str:
    """Standalone Python source defining ``Net`` and ``make_example() -> (net, input, cotangent)`` for ``spec``."""
    widths = spec.widths()
    init = ["def __init__(self):", f"{_INDENT}super().__init__()"]
    init += [
        f"{_INDENT}self.layer{i} = {LAYER_KINDS[layer.kind].constructor(layer.params, widths[i])}"
        for i, layer in enumerate(spec.layers)
    ]
    body = "\n".join(_INDENT + line if line else "" for line in [*init, "", *_forward_lines(spec)])
    helpers = "".join(source + "\n\n" for source in _helper_sources(spec))
    return f'''import torch
from torch import nn
from torch.utils.checkpoint import checkpoint


{helpers}class Net(nn.Module):
{body}


SEED = {spec.seed}
DTYPE = torch.{spec.dtype}
DEVICE = {spec.device!r}
INPUT_SHAPE = {spec.input_shape}
OUTPUT_SHAPE = {spec.output_shape}


def make_example():
    """The network, its input (requiring grad) and the backward cotangent, all drawn from SEED."""
    torch.manual_seed(SEED)
    net = Net().to(device=DEVICE, dtype=DTYPE)
    generator = torch.Generator().manual_seed(SEED)
    x = torch.randn(INPUT_SHAPE, generator=generator).to(device=DEVICE, dtype=DTYPE).requires_grad_()
    cotangent = torch.randn(OUTPUT_SHAPE, generator=generator).to(device=DEVICE, dtype=DTYPE)
    return net, x, cotangent
'''


def build_example(spec: NetSpec) -> Example:
    """Execute ``network_source(spec)`` and return its network, input and cotangent."""
    source = network_source(spec)
    # A distinct, registered file name per source keeps tracebacks and dynamo's messages readable.
    filename = f"<fuzz-net-{hashlib.sha1(source.encode()).hexdigest()[:12]}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(keepends=True), filename)
    namespace: dict = {"__name__": "fuzz_generated_net"}
    exec(compile(source, filename, "exec"), namespace)
    return Example(*namespace["make_example"]())
