"""A failure's standalone repro.py: the network's source, the oracle's arithmetic and a verdict, in plain torch and
thunder (exit 0 matches, 1 reproduces, 2 anything else)."""

from __future__ import annotations

import inspect
import re
from collections.abc import Sequence

import fuzz.judge.memory
import fuzz.judge.tolerance
import fuzz.run.passes
import fuzz.run.regions
from fuzz.fix import describe, meta_preserving
from fuzz.generate.spec import NetSpec
from fuzz.judge.failures import ParityFailure
from fuzz.model_builder import network_source
from fuzz.report import repro_template

# A repro.py's body is fuzz.report.repro_template's source without its docstring and its in-package definitions.
_BEGIN = "# repro.py: begin of the definitions."
_END = "# repro.py: end of the definitions.\n"


def _script_parts() -> tuple[str, str]:
    """`fuzz.report.repro_template`'s source before its definitions (its docstring cut) and after them."""
    source = inspect.getsource(repro_template)
    head, rest = source.split(_BEGIN)
    return head.split('"""\n\n', 1)[1].rstrip("\n") + "\n", rest.split(_END)[1]


def repro_source(spec: NetSpec, failure: ParityFailure, converter: str, executors: Sequence[str] = ()) -> str:
    """A standalone script (plain torch + thunder): exit 0 when thunderfx matches, 1 when the same failure
    (class, and `ThunderCrash.crash_signature` for a crash; for a time-out, thunderfx still running after the
    recorded limit) reproduces, 2 on anything else.

    ``executors``: thunder's default executors the failure was found with (empty: thunder's own defaults).
    Its header names the installed thunder, torch and converter (`found_with`).
    """
    summary = str(failure).splitlines()[0] if str(failure) else ""
    converter_source = inspect.getsource(meta_preserving) if converter == "fixed" else ""
    values = repro_template.constants(spec, failure, converter, executors)
    head, tail = _script_parts()
    return (
        f'"""Repro: {failure.failure_class} ({failure.triage}) of thunderfx against eager PyTorch.\n\n'
        f"Found with {found_with(converter)}.\n"
        f"First observed: {_docstring_safe(summary)}\n"
        "Exit status: 0 thunderfx matches, 1 this failure reproduces, 2 anything else (could not run, another "
        f"failure).\nNeeds only torch{', transformers' if spec.model else ''} and lightning-thunder.\n"
        '"""\n\n'
        + head
        + network_source(spec)
        + "\n\n"
        + "".join(f"{name} = {value!r}\n" for name, value in values.items())
        + "\n\n"
        + oracle_source()
        + ("\n\n\n" + converter_source if converter_source else "")
        + tail
    )


def _docstring_safe(text: str) -> str:
    """``text`` as it can stand inside a triple-quoted docstring."""
    return text.replace("\\", "\\\\").replace('"""', '\\"\\"\\"')


def found_with(converter: str) -> str:
    """The installed thunder and torch, and the converter ``converter`` on them, in words."""
    import thunder
    import torch

    return f"lightning-thunder {thunder.__version__}, torch {torch.__version__}; converter {describe(converter)}"


def oracle_source() -> str:
    """`fuzz.run.passes`, `fuzz.judge.tolerance`, `fuzz.run.regions` and `fuzz.judge.memory`, verbatim but for the
    tolerance rules' import of passes: the oracle a repro.py carries."""
    rules = re.sub(
        r"^from fuzz\.run\.passes import \([^)]*\)\n", "", inspect.getsource(fuzz.judge.tolerance), flags=re.M
    )
    assert "from fuzz" not in rules, "fuzz.judge.tolerance may import nothing of ours but fuzz.run.passes"
    memory = inspect.getsource(fuzz.run.regions) + "\n\n" + inspect.getsource(fuzz.judge.memory)
    return inspect.getsource(fuzz.run.passes) + "\n\n" + rules + "\n\n" + memory
