"""The house's numbers (issue 48): modules over 300 lines, functions over 60 lines, upward arrows (a stage's module
importing its stage's public entry point back), and family names written as strings (a family's test name, or a
``-k`` expression over them) outside the family table.

``python -m tools.house_metrics [--list]``: one line per number (``--list``: what each counts).
"""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

from fuzz.campaign.families import FAMILIES, GENERAL

ROOT = Path(__file__).resolve().parent.parent
MODULE_LINES, FUNCTION_LINES = 300, 60
# Each stage's public entry point (docs/architecture.md) and the package that is the rest of its stage.
ENTRY_POINTS = {"fuzz.strategies": "fuzz.generate", "fuzz.model_builder": "fuzz.build", "fuzz.fix": "fuzz.run"}
# A family named by its test: a test name, a part of one, or a `-k` expression over them (the general family's name is
# no word a test or expression would carry).
_ANY = "|".join(family.name for family in FAMILIES if family is not GENERAL)
FAMILY_TEST = re.compile(
    rf"test_(?:op_sweep|({_ANY})_)|\bnot ({_ANY}) and\b|\band not ({_ANY})\b|^_?({_ANY})_ckpt_grad_parity"
)
# Where family names belong: the family table and the test module whose tests it names.
FAMILY_HOMES = ("fuzz.campaign.families", "fuzz.test_ckpt_grad_parity")


def _modules(*folders: str) -> list[Path]:
    return sorted(path for folder in folders for path in (ROOT / folder).rglob("*.py"))


def _name(path: Path) -> str:
    return ".".join(path.relative_to(ROOT).with_suffix("").parts)


def long_modules() -> list[str]:
    return [f"{_name(p)} {n}" for p in _modules("fuzz") if (n := len(p.read_text().splitlines())) > MODULE_LINES]


def long_functions() -> list[str]:
    found = []
    for path in _modules("fuzz"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                if (lines := node.end_lineno - node.lineno + 1) > FUNCTION_LINES:
                    found.append(f"{_name(path)}.{node.name} {lines}")
    return found


def _imported(node: ast.AST) -> list[str]:
    """The modules an import statement imports (``from fuzz import strategies`` imports ``fuzz.strategies``)."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if isinstance(node, ast.ImportFrom) and node.module:
        return [node.module, *(f"{node.module}.{alias.name}" for alias in node.names)]
    return []


def upward_arrows() -> list[str]:
    found = []
    for path in _modules("fuzz"):
        module = _name(path)
        for node in ast.walk(ast.parse(path.read_text())):
            for imported in _imported(node):
                if imported in ENTRY_POINTS and module.startswith(ENTRY_POINTS[imported] + "."):
                    found.append(f"{module} -> {imported}")
    return found


def _docstrings(tree: ast.AST) -> set[int]:
    nodes = [tree, *(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.ClassDef | ast.AsyncFunctionDef))]
    return {id(n.body[0].value) for n in nodes if n.body and isinstance(n.body[0], ast.Expr)}


def family_strings() -> list[str]:
    found = []
    for path in _modules("fuzz", "tests", "tools"):
        if _name(path) in FAMILY_HOMES or path == Path(__file__).resolve():
            continue
        tree = ast.parse(path.read_text())
        skip = _docstrings(tree)
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip:
                if matches := FAMILY_TEST.findall(node.value):
                    names = sorted({name or "sweep" for match in matches for name in match if name} or {"sweep"})
                    found.append(f"{_name(path)}:{node.lineno} {','.join(names)}")
    return found


def main(argv: list[str]) -> int:
    for title, items in (
        (f"modules over {MODULE_LINES} lines", long_modules()),
        (f"functions over {FUNCTION_LINES} lines", long_functions()),
        ("upward arrows", upward_arrows()),
        ("family names as strings outside the table", family_strings()),
    ):
        print(f"{title}: {len(items)}")
        if "--list" in argv:
            print("".join(f"  {item}\n" for item in items), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
