"""`NetSpec`: a generated network as plain data, with a JSON round-trip and validation.

A spec holds no torch objects. Everything needed to rebuild the network, its input and its
cotangent bit for bit is in it (the seed included). The schema is documented in docs/spec.md.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from fuzz.generate import program
from fuzz.generate.architectures import ZooModel, model_problems
from fuzz.generate.kind import Incoming, is_int
from fuzz.generate.layers import LAYER_KINDS
from fuzz.generate.spec_parts import (
    AUTOCAST_DTYPE,
    AUTOCAST_REGIONS,
    DEVICES,
    DTYPES,
    GRAD_MODES,
    INPUTS,
    MAX_TRAINING_STEPS,
    OPTIMIZERS,
    CheckpointSpec,
    LayerSpec,
    SpecError,
    TrainingSpec,
)

SPEC_VERSION = 1
_OPTIONAL = ("outputs", "training")


@dataclass
class NetSpec:
    """A network: input ``(batch, [seq,] features)`` of ``dtype`` on ``device``, a layer stack, checkpoints.

    With ``vocab`` set the input is instead integer tokens ``(batch, [seq])`` that an
    ``nn.Embedding(vocab, features)`` turns into features before the first layer. With ``spatial``
    set the input is an image ``(batch, features, *spatial)``: ``features`` channels, 1 to 3 spatial dims.
    ``autocast``: one of `AUTOCAST_REGIONS` (float32 networks only); "checkpoints" needs a
    checkpoint of api "checkpoint". ``inputs``: one of `INPUTS`.
    With ``model`` set the network is that transformers model (`fuzz.generate.architectures`) on ``(batch, seq)``
    tokens of ``vocab``, returning its logits: no layers, no checkpoints of ours, ``features`` its hidden size.
    A program (`is_program`: its layers have ``reads``) returns its ``outputs`` values (default: the last) flattened and
    concatenated. ``training``: run as training steps (`TrainingSpec`) instead of one forward and backward.
    """

    features: int
    layers: list[LayerSpec]
    checkpoints: list[CheckpointSpec] = field(default_factory=list)
    batch: int = 1
    seq: int | None = None
    dtype: str = "float32"
    device: str = "cpu"
    seed: int = 0
    input_requires_grad: bool = True
    vocab: int | None = None
    autocast: str | None = None
    inputs: str = "random"
    spatial: list[int] | None = None
    model: ZooModel | None = None
    outputs: list[int] | None = None
    training: TrainingSpec | None = None
    version: int = SPEC_VERSION

    @property
    def input_shape(self) -> tuple[int, ...]:
        """Shape of the tensor entering the first layer (after the embedding, if any)."""
        return self._shape(self.features, self.spatial)

    def _shape(self, width: int, spatial: list[int] | tuple[int, ...] | None) -> tuple[int, ...]:
        if spatial is not None:
            return (self.batch, width, *spatial)
        return (self.batch, width) if self.seq is None else (self.batch, self.seq, width)

    @property
    def is_program(self) -> bool:
        """Whether the spec is a program (`fuzz.generate.program`) rather than a layer stack."""
        return self.outputs is not None or any(layer.reads is not None for layer in self.layers)

    def incoming(self) -> list[Incoming]:
        """What enters each layer (batch, width, spatial sizes; a program's layer: the first value it reads), then
        what the last layer outputs."""
        if self.is_program:
            shapes = [value.shape for value in program.values(self.layers, self.checkpoints, self._input())]
            return [shapes[program.reads_of(layer, i)[0]] for i, layer in enumerate(self.layers)] + [shapes[-1]]
        shapes = [self._input()]
        for layer in self.layers:
            shapes.append(LAYER_KINDS[layer.kind].output(layer.params, shapes[-1]))
        return shapes

    def _input(self) -> Incoming:
        spatial = None if self.spatial is None else tuple(self.spatial)
        return Incoming(self.batch, self.features, spatial, self.dtype, self.device)

    def widths(self) -> list[int]:
        """The width (features or channels) entering each layer, then the width of the output."""
        return [shape.width for shape in self.incoming()]

    @property
    def output_shape(self) -> tuple[int, ...]:
        if self.model is not None:
            return (self.batch, self.seq, self.vocab)
        if self.is_program:
            shapes = program.values(self.layers, self.checkpoints, self._input())
            return (sum(shapes[value].shape.batch * shapes[value].shape.width for value in program.outputs_of(self)),)
        out = self.incoming()[-1]
        return self._shape(out.width, out.spatial)

    @property
    def precision(self) -> str:
        """The narrowest dtype it computes in: `AUTOCAST_DTYPE` under autocast (a program's autocast region too);
        float32 for a float64 zoo model (transformers computes its norms, rotary embeddings and attention softmax in
        float32); else ``dtype``."""
        zoo_float64 = self.model is not None and self.dtype == "float64"
        autocast = self.autocast or any(layer.grad_mode == "autocast" for layer in self.layers)
        return AUTOCAST_DTYPE if autocast else "float32" if zoo_float64 else self.dtype

    @property
    def random(self) -> bool:
        """Whether some layer draws random numbers (dropout in training mode)."""
        if self.model is not None:
            return self.model.dropout > 0
        return any(LAYER_KINDS[layer.kind].random for layer in self.layers)

    @property
    def checkpoint_regions(self) -> int:
        """How many checkpointed regions the network has: our checkpoints, or each layer of a checkpointed model."""
        if self.model is not None:
            return self.model.layers if self.model.checkpointing else 0
        return len(self.checkpoints)

    def checkpointed(self, index: int) -> bool:
        """Whether layer ``index`` runs inside a checkpoint."""
        return any(c.start <= index < c.stop for c in self.checkpoints)

    def to_dict(self) -> dict[str, Any]:
        """The spec as JSON-ready data; a stack leaves out the program fields and a spec without training steps the
        training field (their JSON is as before programs and training)."""
        data = {key: value for key, value in asdict(self).items() if value is not None or key not in _OPTIONAL}
        data["layers"] = [
            {k: v for k, v in layer.items() if v is not None or k not in ("reads", "grad_mode")}
            for layer in data["layers"]
        ]
        return data

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=True)

    @classmethod
    def from_dict(cls, data: Any) -> NetSpec:
        """Build and validate a spec from parsed JSON; raises `SpecError` naming the offending field."""
        if not isinstance(data, dict):
            raise SpecError(f"a spec must be a JSON object, got {type(data).__name__}")
        try:
            spec = cls(
                **{
                    **data,
                    "layers": [LayerSpec(**layer) for layer in data.get("layers", [])],
                    "checkpoints": [CheckpointSpec(**c) for c in data.get("checkpoints", [])],
                    "model": None if data.get("model") is None else ZooModel(**data["model"]),
                    "training": None if data.get("training") is None else TrainingSpec(**data["training"]),
                }
            )
        except TypeError as error:
            raise SpecError(f"malformed spec: {error}") from error
        validate(spec)
        return spec

    @classmethod
    def from_json(cls, text: str) -> NetSpec:
        try:
            data = json.loads(text)
        except json.JSONDecodeError as error:
            raise SpecError(f"spec is not valid JSON: {error}") from error
        return cls.from_dict(data)


def _require(condition: bool, message: str) -> None:
    if not condition:
        raise SpecError(message)


def _is_positive_int(value: Any) -> bool:
    return is_int(value) and value >= 1


def any_trainable(layers: Sequence[LayerSpec]) -> bool:
    """Whether some layer of ``layers`` has parameters that train (not frozen)."""
    return any(not layer.frozen and LAYER_KINDS[layer.kind].trainable(layer.params) for layer in layers)


def input_update_allowed(index: int, checkpointed: bool, input_is_leaf_with_grad: bool) -> bool:
    """Whether eager accepts an in-place update of layer ``index``'s own input: only of the network's input, outside
    checkpoints, when it is not a leaf that requires grad (docs/oracle.md: what eager rejects)."""
    return index == 0 and not checkpointed and not input_is_leaf_with_grad


def _validate_model(spec: NetSpec) -> None:
    for problem in model_problems(spec.model, spec.seq, spec.vocab):
        raise SpecError(problem)
    _require(not spec.layers and not spec.checkpoints, "a model spec has no layers or checkpoints of its own")
    _require(spec.features == spec.model.hidden, f"features must be the model's hidden size {spec.model.hidden}")
    _require(
        not spec.input_requires_grad and spec.autocast is None and spec.spatial is None,
        "a model spec takes tokens: input_requires_grad false, no autocast, no spatial",
    )


def _validate_training(spec: NetSpec) -> None:
    training = spec.training
    _require(
        is_int(training.steps) and 1 <= training.steps <= MAX_TRAINING_STEPS,
        f"training.steps must be 1..{MAX_TRAINING_STEPS}, got {training.steps!r}",
    )
    _require(
        training.optimizer in OPTIMIZERS,
        f"training.optimizer {training.optimizer!r} is not one of {', '.join(OPTIMIZERS)}",
    )
    _require(
        training.batches is None
        or isinstance(training.batches, list)
        and len(training.batches) == training.steps
        and all(map(_is_positive_int, training.batches))
        and training.batches[0] == spec.batch,
        f"training.batches must be null or {training.steps} positive batch sizes starting with batch "
        f"{spec.batch}, got {training.batches!r}",
    )
    # Eager and thunder draw different random numbers: a random network is judged against thunderfx without
    # checkpoints (fuzz.judge.verdict), which one training step already covers.
    _require(not spec.random, "training steps need a network without random layers (dropout)")
    for batch in sorted(set(training.batches or ())):
        if batch != spec.batch:
            try:
                validate(replace(spec, batch=batch, training=None))
            except SpecError as error:
                raise SpecError(f"training.batches: batch {batch} does not fit the network: {error}") from error


def validate(spec: NetSpec) -> None:
    """Raise `SpecError` unless ``spec`` describes a network the builder can build and eager can run."""
    _require(spec.version == SPEC_VERSION, f"spec version {spec.version!r} is not supported (expected {SPEC_VERSION})")
    _require(spec.dtype in DTYPES, f"dtype {spec.dtype!r} is not one of {', '.join(DTYPES)}")
    _require(spec.device in DEVICES, f"device {spec.device!r} is not one of {', '.join(DEVICES)}")
    for name in ("features", "batch"):
        _require(
            _is_positive_int(getattr(spec, name)), f"{name} must be a positive integer, got {getattr(spec, name)!r}"
        )
    _require(
        spec.seq is None or _is_positive_int(spec.seq), f"seq must be null or a positive integer, got {spec.seq!r}"
    )
    _require(isinstance(spec.seed, int) and spec.seed >= 0, f"seed must be a non-negative integer, got {spec.seed!r}")
    _require(spec.vocab is None or _is_positive_int(spec.vocab), f"vocab must be null or >= 1, got {spec.vocab!r}")
    _require(isinstance(spec.input_requires_grad, bool), "input_requires_grad must be true or false")
    _require(spec.inputs in INPUTS, f"inputs {spec.inputs!r} is not one of {', '.join(INPUTS)}")
    _require(
        spec.inputs != "ones" or spec.vocab is None or spec.vocab >= 2,
        "inputs 'ones' feeds token 1: vocab must be at least 2",
    )
    if spec.model is not None:
        _validate_model(spec)
    else:
        _validate_layers(spec)
    if spec.training is not None:
        _validate_training(spec)


def _validate_layers(spec: NetSpec) -> None:
    _require(len(spec.layers) >= 1, "a spec needs at least one layer")
    _require(
        spec.spatial is None
        or (isinstance(spec.spatial, list) and 1 <= len(spec.spatial) <= 3)
        and all(map(_is_positive_int, spec.spatial)),
        f"spatial must be null or a list of 1 to 3 positive integers, got {spec.spatial!r}",
    )
    _require(
        spec.spatial is None or (spec.seq is None and spec.vocab is None),
        "an image input (spatial) takes neither seq nor vocab",
    )
    for problem in program.program_problems(spec) if spec.is_program else ():
        raise SpecError(problem)
    shapes = [spec._input()]
    for index in range(len(spec.layers)):
        shapes.append(_validated_layer(spec, index, shapes))
    _validate_grads_and_autocast(spec)
    previous_stop = 0
    for index, ckpt in enumerate(spec.checkpoints):
        for problem in ckpt.problems(index, spec.layers, previous_stop, LAYER_KINDS):
            raise SpecError(problem)
        previous_stop = ckpt.stop
    for problem in program.input_problems(spec) if spec.is_program else ():
        raise SpecError(problem)
    for problem in program.update_problems(spec.layers, spec.checkpoints, spec._input()) if spec.is_program else ():
        raise SpecError(problem)
    for index in program.inference_in_selective(spec.layers, spec.checkpoints) if spec.is_program else ():
        raise SpecError(
            f"layers[{index}] ({spec.layers[index].kind}): grad_mode inference_mode inside a selective checkpoint "
            "(its policy saves what the layer makes: eager rejects saving an inference tensor)"
        )
    if spec.is_program and spec.input_requires_grad and not program.an_output_requires_grad(spec):
        raise SpecError(
            "no output requires grad (each is made under no_grad or inference_mode, or detached): eager's backward "
            "fails; return a value that requires grad too"
        )


def _validate_grad_mode(spec: NetSpec, index: int) -> None:
    layer = spec.layers[index]
    _require(
        layer.grad_mode is None or (spec.is_program and layer.grad_mode in GRAD_MODES),
        f"layers[{index}] ({layer.kind}): grad_mode must be null, or in a program one of {', '.join(GRAD_MODES)}; "
        f"got {layer.grad_mode!r}",
    )
    _require(
        layer.grad_mode != "autocast" or spec.dtype == "float32",
        f"layers[{index}] ({layer.kind}): grad_mode autocast needs a float32 network, got {spec.dtype} (CPU autocast "
        "rejects casting other dtypes)",
    )


def _validated_layer(spec: NetSpec, index: int, shapes: Sequence[Incoming]) -> Incoming:
    """Layer ``index``'s output shape, given the shapes of the values before it; raises `SpecError` if the layer's
    kind, reads, params, freezing or input update is invalid there."""
    layer = spec.layers[index]
    kind = LAYER_KINDS.get(layer.kind)
    _require(kind is not None, f"layers[{index}]: unknown kind {layer.kind!r}; known: {', '.join(LAYER_KINDS)}")
    if spec.is_program:
        for problem in program.reads_problems(spec.layers, index, shapes):
            raise SpecError(problem)
    else:
        _require(kind.flow is None, f"layers[{index}] ({layer.kind}): a data-flow kind needs a program (reads)")
    _validate_grad_mode(spec, index)
    incoming = shapes[program.reads_of(layer, index)[0]]
    width = incoming.width
    _require(
        kind.takes(incoming),
        f"layers[{index}] ({layer.kind}): a {kind.layout} layer cannot take an input of shape "
        f"{spec._shape(width, incoming.spatial)} (images need 'spatial'; see docs/spec.md)",
    )
    expected = {p.name for p in kind.params}
    required = {p.name for p in kind.params if not p.optional}
    _require(
        required <= set(layer.params) <= expected,
        f"layers[{index}] ({layer.kind}): params must be exactly {sorted(required)}"
        + (f" and optionally {sorted(expected - required)}" if expected - required else "")
        + f", got {sorted(layer.params)}",
    )
    for param in kind.params:
        if param.name not in layer.params:
            continue
        value = layer.params[param.name]
        _require(
            param.is_valid(value, width),
            f"layers[{index}] ({layer.kind}): invalid {param.name}={value!r} for input width {width}",
        )
    fitted = dict(kind.fit(layer.params, incoming))
    _require(
        fitted == layer.params,
        f"layers[{index}] ({layer.kind}): params {layer.params} do not fit an input of shape "
        f"{spec._shape(width, incoming.spatial)}; fitted they would be {fitted}",
    )
    _require(
        layer.frozen is False or (layer.frozen is True and kind.trainable(layer.params)),
        f"layers[{index}] ({layer.kind}): frozen must be false for a layer without parameters",
    )
    _require(
        not kind.mutates_input
        or input_update_allowed(index, spec.checkpointed(index), spec.input_requires_grad and spec.vocab is None),
        f"layers[{index}] ({layer.kind}): only the first layer, outside checkpoints, of a network whose input "
        "needs no grad may update its input in place (eager rejects the rest: see docs/oracle.md)",
    )
    return kind.output(layer.params, incoming)


def _validate_grads_and_autocast(spec: NetSpec) -> None:
    _require(
        any_trainable(spec.layers) or spec.input_requires_grad or spec.vocab is not None,
        "nothing requires grad: unfreeze a layer with parameters or let the input require grad",
    )
    _require(spec.autocast in AUTOCAST_REGIONS, f"autocast {spec.autocast!r} is not one of {AUTOCAST_REGIONS}")
    _require(
        spec.autocast is None or spec.dtype == "float32",
        f"autocast needs a float32 network, got {spec.dtype} (CPU autocast rejects casting other dtypes)",
    )
    _require(
        spec.autocast != "checkpoints" or any(c.api == "checkpoint" for c in spec.checkpoints),
        "autocast 'checkpoints' needs a checkpoint of api 'checkpoint'",
    )
