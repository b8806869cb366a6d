"""What a compared tensor is, independent of sizes and positions: the role the registry's signatures and the run's
clusters name it by."""

from __future__ import annotations

import re

from fuzz.generate.spec import NetSpec
from fuzz.run.passes import AFTER_TRAINING, AT_STEP

# The roles of training steps' tensors (`tensor_role`).
LATER = " at a later step"
AFTER = "state after training"


def tensor_role(spec: NetSpec, name: str) -> str:
    """What a compared tensor is, independent of sizes and positions: "output", "grad of input", "grad of
    <layer kind or op>.<parameter>", "state", or a model parameter's name with its numbers blanked; a later training
    step's "<role> at a later step", and what training leaves "state after training"."""
    if AT_STEP in name:
        return tensor_role(spec, name.split(AT_STEP)[0]) + LATER
    if name.endswith(AFTER_TRAINING):
        return AFTER
    if name in ("output", "grad of input"):
        return name
    if name.endswith((" after forward", " after backward")):
        return "state"
    if not name.startswith("grad of "):  # a measure of its own, as a random model's "self-consistency"
        return name
    parameter = name.removeprefix("grad of ")
    layer = re.match(r"layer(\d+)\.(.*)", parameter)
    if layer and int(layer.group(1)) < len(spec.layers):
        chosen = spec.layers[int(layer.group(1))]
        kind = chosen.params.get("op", chosen.kind)
        return f"grad of {kind}.{re.sub(r'[0-9]+', '#', layer.group(2))}"
    return "grad of " + re.sub(r"[0-9]+", "#", parameter)
