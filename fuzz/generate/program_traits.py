"""The data flows a program exercises (`fuzz.generate.program`), as coverage labels (`fuzz.generate.coverage`)."""

from __future__ import annotations

from functools import cache
from typing import Any

from fuzz.generate.catalog_flow import update_calls
from fuzz.generate.flow import INDEXED_KINDS, VIEW_KINDS
from fuzz.generate.layers import LAYER_KINDS
from fuzz.generate.program import (
    Value,
    further_inputs,
    input_update,
    outputs_of,
    reads_of,
    region_inputs,
    region_of,
    values,
)
from fuzz.generate.spec import NetSpec
from fuzz.generate.spec_parts import GRAD_MODES, LayerSpec

VIEW_NAMES = frozenset(kind.name for kind in VIEW_KINDS)
INDEXED_UPDATE_NAMES = frozenset(kind.name for kind in INDEXED_KINDS if kind.flow.updates)


def _updates(spec: Any) -> list[int]:
    """The layers of ``spec`` that update a value in place."""
    return [i for i, layer in enumerate(spec.layers) if (flow := LAYER_KINDS[layer.kind].flow) and flow.updates]


def _structures(spec: Any) -> dict[str, bool]:
    """Each structure label a program may show (one label each, whatever the program), with whether ``spec`` does."""
    made = values(spec.layers, spec.checkpoints, spec._input())
    later = [reads_of(layer, index) for index, layer in enumerate(spec.layers)] + [outputs_of(spec)]
    updates = _updates(spec)
    bases = [made[spec.layers[i].reads[0]].base for i in updates]
    input_bases = [[made[v].base for v in region_inputs(spec, number)] for number in range(len(spec.checkpoints))]
    every_read = [read for reads in later for read in reads]

    def original_read_after_update(index: int, base: int) -> bool:
        clone = spec.layers[base - 1] if base else None
        return clone is not None and clone.kind == "clone" and any(clone.reads[0] in r for r in later[index + 1 :])

    present = {
        "program value read more than once": len(every_read) > len(set(every_read)),
        "program several outputs": len(outputs_of(spec)) > 1,
        "program update in a checkpoint": any(region_of(spec.checkpoints, i) is not None for i in updates),
        "program two updates of one tensor": len(set(bases)) < len(bases),
        "program original read after its clone's update": any(map(original_read_after_update, updates, bases)),
        "program checkpoint of aliased inputs": any(len(set(taken)) < len(taken) for taken in input_bases),
        "program updated value into a checkpoint": any(
            base in taken and i < spec.checkpoints[number].start
            for number, taken in enumerate(input_bases)
            for i, base in zip(updates, bases, strict=True)
        ),
    }
    present["program update through a view"] = any(
        made[spec.layers[i].reads[0]].base != spec.layers[i].reads[0] for i in updates
    )
    present["program output needing no grad"] = not all(made[value].requires_grad for value in outputs_of(spec))
    present.update(_input_traits(spec, made, updates, bases))
    return present


def flow_traits(spec: Any) -> list[str]:
    """The data flows a program exercises that a layer stack cannot express, as labels (`fuzz.generate.coverage`)."""
    updates = _updates(spec)
    views = sorted({layer.kind for layer in spec.layers if layer.kind in VIEW_NAMES})
    catalog_updates = sorted({spec.layers[i].params["target"] for i in updates if "target" in spec.layers[i].params})
    indexed = sorted({spec.layers[i].kind for i in updates if spec.layers[i].kind in INDEXED_UPDATE_NAMES})
    modes = sorted({layer.grad_mode for layer in spec.layers if layer.grad_mode})
    modes_in_checkpoints = sorted(
        {
            layer.grad_mode
            for i, layer in enumerate(spec.layers)
            if layer.grad_mode and region_of(spec.checkpoints, i) is not None
        }
    )
    return [
        "program",
        *(label for label, holds in _structures(spec).items() if holds),
        *(f"program grad mode {mode}" for mode in modes),
        *(f"program grad mode {mode} in a checkpoint" for mode in modes_in_checkpoints),
        *(f"program view {name}" for name in views),
        *(["program catalog update"] if catalog_updates else []),
        *(f"program catalog update {target}" for target in catalog_updates),
        *(f"program indexed update {name}" for name in indexed),
    ]


@cache
def flow_labels() -> frozenset[str]:
    """Every label `flow_traits` gives some program: what ``--fuzz-structure`` may ask a campaign's programs for."""
    simplest = NetSpec(features=1, layers=[LayerSpec("clone", reads=[0])])
    return frozenset(
        [
            "program",
            *_structures(simplest),
            *(f"program grad mode {mode}{where}" for mode in GRAD_MODES for where in ("", " in a checkpoint")),
            *(f"program view {name}" for name in VIEW_NAMES),
            "program catalog update",
            *(f"program catalog update {call.target}" for call in update_calls()),
            *(f"program indexed update {name}" for name in INDEXED_UPDATE_NAMES),
        ]
    )


class Showing:
    """A filter of drawn programs: whether one shows every label of ``structures`` (`flow_labels`). Raises
    `ValueError` where the first ``patience`` programs all lack them: what the draw's options rule out (no further
    inputs without catalog nodes, a grad mode not drawn) would otherwise leave a campaign drawing for its whole budget
    and running nothing. Once one showed them it never raises (a shrinking's candidates may lack them for long)."""

    def __init__(self, structures: tuple[str, ...], patience: int = 5000) -> None:
        self.structures, self.patience, self.missed = frozenset(structures), patience, 0

    def __call__(self, spec: Any) -> bool:
        if self.structures <= set(flow_traits(spec)):
            self.missed = -1  # (shown once: never raises)
            return True
        if self.missed >= 0:
            self.missed += 1
        if self.missed >= self.patience:
            raise ValueError(
                f"--fuzz-structure {', '.join(sorted(self.structures))}: none of the first {self.patience} programs "
                "drawn showed it; the other options may rule it out (--fuzz-catalog-nodes, --fuzz-grad-modes, the ci "
                "profile's vocabulary)"
            )
        return False


def _input_traits(spec: Any, made: list[Value], updates: list[int], bases: list[int]) -> dict[str, bool]:
    """The inputs-as-state structures a program exercises (``updates``: its update layers, ``bases``: what each
    updates), each label with whether it is there."""
    inputs = further_inputs(spec.layers)
    input_updates = {i: input_update(spec, i) for i in updates}
    updated_inputs = [base for i, base in zip(updates, bases, strict=True) if input_updates[i]]
    return {
        "program several inputs": bool(inputs),
        "program input needing no grad": any(not made[value].requires_grad for value in inputs),
        "program inputs viewing one another": any(spec.layers[v - 1].kind == "input_view" for v in inputs),
        "program update of an input": bool(updated_inputs),
        "program two updates of one input": len(set(updated_inputs)) < len(updated_inputs),
        "program input given grad by an update": any("gives grad" in t for t in input_updates.values()),
        "program update of an aliased input": any("aliased" in t for t in input_updates.values()),
        "program update of an input through a view": any("through a view" in t for t in input_updates.values()),
    }
