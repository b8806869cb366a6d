"""Each known issue's candidate fix: ``known_issues/<id>/fix.py``, edits of the installed thunder's (or torch's)
source applied to the running process and removed again (docs/known-issues.md, "Fixes").

A fix is plain data: `Edit`s, each a span of one source file and what it becomes. The same edits are the fix's
unified diff (the shape of an upstream pull request, `Fix.diff`) and its runtime patch (`applied`):
- a changed function (or method) keeps its identity: its ``__code__`` is swapped, so every registry, decorator and
  symbol holding it runs the new body;
- any other changed or added top-level statement (a ``register_grad`` of a new rule) runs in the module's namespace;
  what it changes there, and in the dict registries of the module and of ``thunder.core.transforms``, is undone.
An edit whose span is no longer in the installed file is stale (`StaleFixError`: one line, never a crash).
"""

from __future__ import annotations

import ast
import contextlib
import copy
import difflib
import functools
import importlib
import importlib.util
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import CodeType, FunctionType, ModuleType

from fuzz.registry.issue import KNOWN_ISSUES_DIR

FIX_FILE = "fix.py"
_ABSENT = object()
# Where thunder keeps its derivative rules and symbol tables: a statement a fix runs may register into them.
_REGISTRY_MODULES = ("thunder.core.transforms", "thunder.torch")


class StaleFixError(RuntimeError):
    """A fix whose edit no longer fits the installed source (the patched function changed): one line."""


@dataclass(frozen=True)
class Edit:
    """In module ``module``'s source file, the one occurrence of ``old`` becomes ``new``."""

    module: str
    old: str
    new: str


@dataclass(frozen=True)
class Fix:
    """Entry ``entry``'s candidate fix: its ``edits``; ``backport``: the upstream pull request it backports, if any;
    ``thunder_tests``: the selections of thunder's own tests (pytest arguments) that cover what it touches;
    ``builds_on``: the entries whose fixes it needs in place (applied with it wherever it is applied)."""

    entry: str
    edits: tuple[Edit, ...]
    why: str
    backport: str | None = None
    thunder_tests: tuple[str, ...] = field(default=())
    builds_on: tuple[str, ...] = field(default=())

    def diff(self) -> str:
        """The unified diff of the edits against the installed source files (paths as in the wheel)."""
        parts = []
        for module, edits in _by_module(self.edits).items():
            path, old = _source(module)
            new = _edited(old, edits, module)
            name = _wheel_path(path, module)
            parts += difflib.unified_diff(
                old.splitlines(keepends=True), new.splitlines(keepends=True), f"a/{name}", f"b/{name}", n=3
            )
        return "".join(parts)

    def changed_lines(self) -> int:
        """How many lines the diff removes or adds (fix.json records it: a fix changed since its checks shows)."""
        return sum(line[:1] in "+-" and line[:3] not in ("+++", "---") for line in self.diff().splitlines())


def _by_module(edits: Sequence[Edit]) -> dict[str, list[Edit]]:
    grouped: dict[str, list[Edit]] = {}
    for edit in edits:
        grouped.setdefault(edit.module, []).append(edit)
    return grouped


def _source(module: str) -> tuple[Path, str]:
    path = Path(importlib.util.find_spec(module).origin)
    return path, path.read_text()


def _wheel_path(path: Path, module: str) -> str:
    """``path`` from the folder that holds ``module``'s top-level package: what the wheel names it, wherever it was
    installed (site-packages, or a ``pip install --target`` folder on PYTHONPATH: thunder_versions, a GPU lease)."""
    package_root = path.parents[module.count(".") + (path.name == "__init__.py")]
    return path.relative_to(package_root).as_posix()


def _edited(text: str, edits: Sequence[Edit], module: str) -> str:
    for edit in edits:
        if text.count(edit.old) != 1:
            found = "not found" if edit.old not in text else f"found {text.count(edit.old)} times"
            first = edit.old.strip().splitlines()[0][:60]
            raise StaleFixError(f"{module}: the span the fix edits ({first!r} ...) is {found} in the installed source")
        text = text.replace(edit.old, edit.new)
    return text


def load_fix(entry: str) -> Fix | None:
    """Entry ``entry``'s fix (None: the entry has no fix.py). Its module defines ``EDITS`` and ``WHY``, optionally
    ``BACKPORT``, ``THUNDER_TESTS`` and ``BUILDS_ON``."""
    path = KNOWN_ISSUES_DIR / entry / FIX_FILE
    if not path.exists():
        return None
    namespace: dict = {"Edit": Edit}
    exec(compile(path.read_text(), str(path), "exec"), namespace)
    return Fix(
        entry,
        tuple(namespace["EDITS"]),
        namespace["WHY"],
        namespace.get("BACKPORT"),
        tuple(namespace.get("THUNDER_TESTS", ())),
        tuple(namespace.get("BUILDS_ON", ())),
    )


def with_bases(fixes: Sequence[Fix]) -> list[Fix]:
    """``fixes``, each preceded by the fixes it builds on (theirs first), every fix once."""
    ordered: list[Fix] = []
    seen: set[str] = set()

    def add(fix: Fix) -> None:
        if fix.entry not in seen:
            seen.add(fix.entry)
            for base in fixes_for(fix.builds_on):
                add(base)
            ordered.append(fix)

    for fix in fixes:
        add(fix)
    return ordered


def diff_with_bases(fix: Fix) -> str:
    """``fix``'s unified diff, preceded by those of the fixes it builds on: the patch its upstream issue holds."""
    return "".join(each.diff() for each in with_bases([fix]))


def _changed_statements(old: str, new: str) -> list[ast.stmt]:
    """The top-level statements of ``new`` (and, inside a class ``old`` has, the class's statements) not in ``old``
    as such; a class ``old`` lacks is one new statement."""
    old_body = ast.parse(old).body
    classes = {s.name for s in old_body if isinstance(s, ast.ClassDef)}
    before = {ast.dump(s) for s in _flat(old_body, classes)}
    return [s for s in _flat(ast.parse(new).body, classes) if ast.dump(s) not in before]


def _flat(body: list[ast.stmt], classes: set[str]) -> Iterator[ast.stmt]:
    for statement in body:
        if isinstance(statement, ast.ClassDef) and statement.name in classes:
            for inner in statement.body:
                inner.owner = statement.name  # the class a method belongs to
                yield inner
        else:
            statement.owner = None
            yield statement


def _target(module: ModuleType, statement: ast.stmt) -> FunctionType | None:
    """The function object of the installed module that ``statement`` (a def) redefines, found through wrappers
    (thunder's symbols keep their function as ``meta``; decorators as ``__wrapped__``)."""
    if not isinstance(statement, ast.FunctionDef):
        return None
    holder = getattr(module, statement.owner) if statement.owner else module
    candidate = holder.__dict__.get(statement.name) if statement.owner else getattr(module, statement.name, None)
    for _ in range(4):
        if isinstance(candidate, FunctionType) and candidate.__code__.co_name == statement.name:
            return candidate
        candidate = getattr(candidate, "__wrapped__", None) or getattr(candidate, "meta", None)
    return None


def _new_code(statement: ast.FunctionDef, module: ModuleType, path: Path) -> CodeType:
    bare = copy.copy(statement)
    bare.decorator_list = []  # the installed object was decorated once; only its body changes
    tree = ast.Module(body=[bare], type_ignores=[])
    ast.fix_missing_locations(tree)
    scratch: dict = dict(vars(module))
    exec(compile(tree, str(path), "exec"), scratch)
    return scratch[statement.name].__code__


def _snapshot(module: ModuleType) -> tuple[ModuleType, dict, list[tuple[dict, dict]]]:
    """``module``'s namespace and a copy of each dict it holds (thunder's registries are module-level dicts)."""
    namespace = dict(vars(module))
    return module, namespace, [(table, dict(table)) for table in namespace.values() if type(table) is dict]


def _restore(module: ModuleType, namespace: dict, tables: list[tuple[dict, dict]]) -> None:
    for table, before in tables:  # compared by identity: a value's == may be a tensor's
        if len(table) != len(before) or any(table.get(key, _ABSENT) is not value for key, value in before.items()):
            table.clear()
            table.update(before)
    current = vars(module)
    for name in set(current) - set(namespace):
        del current[name]
    for name, value in namespace.items():
        if current.get(name) is not value:
            current[name] = value


@functools.lru_cache(maxsize=256)
def _plan(module_name: str, edits: tuple[Edit, ...]) -> tuple[ModuleType, Path, list[ast.stmt]]:
    """The statements ``edits`` change in the module (cached: a campaign applies the same fixes for each failure)."""
    path, old = _source(module_name)
    new = _edited(old, edits, module_name)
    return importlib.import_module(module_name), path, _changed_statements(old, new)


@contextlib.contextmanager
def applied(fixes: Sequence[Fix]) -> Iterator[None]:
    """The process with ``fixes`` (and the fixes they build on) applied, undone on exit (also on error). Raises
    `StaleFixError` before changing anything when an edit does not fit."""
    # One plan per module, of every fix's edits together: two fixes of one function make one new body.
    edits = [edit for fix in with_bases(fixes) for edit in fix.edits]
    plans = [_plan(module_name, tuple(module_edits)) for module_name, module_edits in _by_module(edits).items()]
    # in the order the modules were imported: a statement added to a lower layer (a new prim) before one that uses it
    imported = {name: index for index, name in enumerate(sys.modules)}
    plans.sort(key=lambda plan: imported[plan[0].__name__])
    touched = {module for module, _, _ in plans} | {sys.modules[n] for n in _REGISTRY_MODULES if n in sys.modules}
    snapshots = [_snapshot(module) for module in touched]
    swapped: list[tuple[FunctionType, CodeType]] = []
    try:
        for module, path, statements in plans:
            for statement in statements:
                if (function := _target(module, statement)) is not None:
                    swapped.append((function, function.__code__))
                    function.__code__ = _new_code(statement, module, path)
                elif statement.owner:
                    raise StaleFixError(
                        f"{module.__name__}: a fix may change a method of {statement.owner}, not add one"
                    )
                else:
                    tree = ast.Module(body=[statement], type_ignores=[])
                    exec(compile(tree, str(path), "exec"), vars(module))
        yield
    finally:
        for function, code in reversed(swapped):
            function.__code__ = code
        for snapshot in snapshots:
            _restore(*snapshot)


def fixes_for(entries: Sequence[str]) -> list[Fix]:
    """The fixes of ``entries``, each of which must have one (a one-line `SystemExit` names the one without)."""
    fixes = [load_fix(entry) for entry in entries]
    if missing := [entry for entry, fix in zip(entries, fixes, strict=True) if fix is None]:
        raise SystemExit(f"no {FIX_FILE} in known_issues/{missing[0]}/: write one (docs/known-issues.md, 'Fixes')")
    return fixes


def main(argv: Sequence[str]) -> int:
    """``script ID[,ID...] PATH [ARGS]``: run a Python file with those fixes applied (its exit status is ours);
    ``pytest ID[,ID...] [PYTEST ARGS]``: run pytest with them (thunder's own tests, for a fix's third check)."""
    if len(argv) < 2 or argv[0] not in ("script", "pytest"):
        print("usage: python -m fuzz.registry.fixes script|pytest ID[,ID...] ...", file=sys.stderr)
        return 2
    fixes = fixes_for(argv[1].split(","))
    with applied(fixes):
        if argv[0] == "pytest":
            import pytest

            return pytest.main(list(argv[2:]))
        import runpy

        sys.argv = list(argv[2:])
        try:
            runpy.run_path(argv[2], run_name="__main__")
        except SystemExit as exit_:
            return exit_.code if isinstance(exit_.code, int) else 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
