"""The program family's part of the terminal summary: its view ops, the op catalog's updates, grad modes, indexed
updates and inputs as state."""

from __future__ import annotations

from typing import Any


def program_structure_lines(summary: dict[str, Any]) -> list[str]:
    """The program family's view ops, catalog updates, grad modes, indexed updates and inputs as state: valid examples
    with each, and those thunder fell back on."""
    coverage, fell_back = summary["coverage"], summary.get("fell_back_coverage", {})

    def cells(prefix: str) -> str:
        labels = sorted(label for label in coverage if label.startswith(prefix))
        return ", ".join(
            f"{label.removeprefix(prefix)} {coverage[label]}/{fell_back.get(label, 0)}" for label in labels
        )

    def cell(label: str) -> str:
        return f"{coverage.get(label, 0)}/{fell_back.get(label, 0)}"

    lines = []
    if views := cells("program view "):
        lines.append(f"program views (examples/thunder fell back): {views}")
    if updates := [label for label in coverage if label.startswith("program catalog update ")]:
        lines.append(
            f"program catalog updates: {len(updates)} in-place ops in {cell('program catalog update')} examples; "
            f"an update through a view in {cell('program update through a view')}"
        )
    if modes := cells("program grad mode "):
        lines.append(
            f"program grad modes: {modes}; an output needing no grad in {cell('program output needing no grad')}"
        )
    if indexed := cells("program indexed update "):
        lines.append(f"program indexed updates: {indexed}")
    if coverage.get("program several inputs"):
        inputs = ", ".join(
            f"{label.removeprefix('program ')} {cell(label)}"
            for label in (
                "program several inputs",
                "program input needing no grad",
                "program inputs viewing one another",
                "program update of an input",
                "program two updates of one input",
                "program input given grad by an update",
                "program update of an aliased input",
                "program update of an input through a view",
            )
        )
        lines.append(f"program inputs as state: {inputs}")
    return lines
