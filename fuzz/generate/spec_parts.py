"""The parts of a `fuzz.generate.spec.NetSpec` that stand alone: its vocabularies (dtypes, devices, checkpoint APIs,
optimizers...), a layer, a checkpoint, training steps, and the error a spec that cannot be built raises."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from fuzz.generate.kind import is_int

DTYPES = ("float32", "float64", "bfloat16", "float16")
DEVICES = ("cpu", "cuda")
# torch.utils.checkpoint.checkpoint; checkpoint_wrapper via apply_activation_checkpointing (one
# module layer); torch.utils.checkpoint.checkpoint_sequential.
CHECKPOINT_APIS = ("checkpoint", "wrapper", "sequential")
DETERMINISM_CHECKS = ("default", "none")
# Where autocast (to AUTOCAST_DTYPE) is on: nowhere, around the whole forward, inside each checkpointed function.
AUTOCAST_REGIONS = (None, "forward", "checkpoints")
AUTOCAST_DTYPE = "bfloat16"
# The grad modes a program's layer may run under (`LayerSpec.grad_mode`), simplest first: consecutive layers under
# one mode (in one checkpoint or outside) are one ``with`` region of the network's source.
GRAD_MODES = ("no_grad", "enable_grad", "inference_mode", "autocast")
# How the input and the backward cotangent are made: drawn from the seed, or all ones (token 1
# for an embedding input; a cotangent of ones is `out.sum().backward()`), as thunder's
# test_checkpointing_thunderfx does.
INPUTS = ("random", "ones")
# Training steps (`TrainingSpec`): the optimizers (fuzz.run.passes.OPTIMIZERS, simplest first) and the most steps.
OPTIMIZERS = ("sgd", "adamw")
MAX_TRAINING_STEPS = 8


class SpecError(ValueError):
    """A spec that cannot describe a valid network; the message says what is wrong."""


@dataclass
class LayerSpec:
    """One layer: its kind (a key of `fuzz.generate.layers.LAYER_KINDS`) and that kind's parameters.

    ``reads``: in a program (`fuzz.generate.program`), the values it reads (0 the network's input, ``k`` layer
    ``k - 1``'s output); None in a layer stack, where each layer reads its predecessor's output.
    ``grad_mode``: in a program, one of `GRAD_MODES` the layer runs under (None: the network's own).
    """

    kind: str
    params: dict[str, Any] = field(default_factory=dict)
    frozen: bool = False
    reads: list[int] | None = None
    grad_mode: str | None = None


@dataclass
class CheckpointSpec:
    """Layers ``start .. stop-1`` run inside one checkpoint, through ``api`` with these options.

    ``selective``: a selective-checkpointing ``context_fn`` whose policy saves matmul outputs.
    ``nested``: the body checkpoints layers ``start+1 .. stop-1`` again (all of them if one).
    ``segments``: the ``segments`` argument of ``checkpoint_sequential``.
    ``extra_args``: the checkpointed function also takes a float (positional) and a tensor
    keyword argument, and applies ``x * scale + shift`` before its layers.
    ``multi_output``: the checkpointed function returns ``(x, x.mean(-1, keepdim=True))`` and the
    caller adds the two.
    The last two exist for api "checkpoint" only.
    """

    start: int
    stop: int
    api: str = "checkpoint"
    use_reentrant: bool = False
    preserve_rng_state: bool = True
    determinism_check: str = "default"
    selective: bool = False
    nested: bool = False
    segments: int = 1
    extra_args: bool = False
    multi_output: bool = False

    def problems(self, index: int, layers: Sequence[LayerSpec], after: int, kinds: Mapping[str, Any]) -> list[str]:
        """What makes this checkpoint, the ``index``-th of a network of ``layers`` (whose kinds are ``kinds``:
        `fuzz.generate.layers.LAYER_KINDS`), invalid where the one before it stops at ``after``; the first problem
        of its span, else of its options, each a one-line message."""
        where, span = f"checkpoints[{index}]", f"[{self.start}, {self.stop})"
        if not (is_int(self.start) and is_int(self.stop) and 0 <= self.start < self.stop <= len(layers)):
            return [f"{where}: segment {span} is not inside the {len(layers)} layers"]
        if self.start < after:
            return [
                f"{where}: segment {span} overlaps or precedes the one before; list segments in layer order "
                "without overlap"
            ]
        inside = [kinds[layer.kind] for layer in layers[self.start : self.stop]]
        flags = ("use_reentrant", "preserve_rng_state", "selective", "nested", "extra_args", "multi_output")
        rules = [
            (self.api in CHECKPOINT_APIS, f"api {self.api!r} is not one of {CHECKPOINT_APIS}"),
            *((isinstance(getattr(self, flag), bool), f"{flag} must be true or false") for flag in flags),
            (
                self.determinism_check in DETERMINISM_CHECKS,
                f"determinism_check {self.determinism_check!r} is not one of {DETERMINISM_CHECKS}",
            ),
            (
                is_int(self.segments) and 1 <= self.segments <= self.stop - self.start,
                f"segments must be 1..{self.stop - self.start}, got {self.segments!r}",
            ),
            (
                not (self.selective and any(kind.inplace for kind in inside)),
                "selective checkpointing cannot hold in-place layers (eager rejects them)",
            ),
            (
                not (self.use_reentrant and (self.selective or self.determinism_check != "default")),
                "use_reentrant=True takes neither selective nor determinism_check",
            ),
            (
                self.api == "checkpoint" or not (self.extra_args or self.multi_output),
                "extra_args and multi_output need api 'checkpoint'",
            ),
            (
                not (self.use_reentrant and self.extra_args),
                "use_reentrant=True takes no keyword arguments (extra_args)",
            ),
            (
                self.preserve_rng_state or not any(kind.random for kind in inside),
                "preserve_rng_state=False with a random layer inside makes eager's own gradient inconsistent with "
                "its forward",
            ),
            (
                self.api != "wrapper" or (len(inside) == 1 and not inside[0].functional),
                "api 'wrapper' wraps exactly one module layer",
            ),
        ]
        return [f"{where}: {message}" for holds, message in rules if not holds][:1]


@dataclass
class TrainingSpec:
    """``steps`` training steps, each a forward, a backward and a step of ``optimizer`` (one of `OPTIMIZERS`).

    Step k's input and cotangent are drawn from the seed plus k; ``batches``: each step's batch size (the first the
    spec's own ``batch``), or None for the spec's batch at every step. A new batch size makes dynamo recompile.
    """

    steps: int = 3
    optimizer: str = "sgd"
    batches: list[int] | None = None
