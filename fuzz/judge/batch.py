"""Networks judged K at a time: one thunderfx compile for K independent networks, each judged as if alone.

`judged_in_batch` runs the batch (`fuzz.run.batched.run_thunderfx_batch`) and judges each member with `check_spec` from
its part of that run (``first_run``): against eager and the float64 reference, probed and checked one precision up as
any network. Only a pass (or an invalid network, which eager alone decides) is concluded from a batch: a member whose
judgment there fails, and every member of a batch that crashed, ran out of its time or that thunder did not compile
all of, is returned as None, to be run alone (the normal path: its verdict, triage, shrinking and repro as ever).
Automatic dynamic shapes are off during the batch (each member is a recompile of the same module-call code, which
would otherwise make dynamo mark later members' sizes dynamic, as no network alone gets). A member judged in a batch
has no memory contract checked (the bytes saved for backward are the batch's).
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import replace

from fuzz.fix import use_converter
from fuzz.generate.spec import NetSpec
from fuzz.judge.outcome import Outcome
from fuzz.judge.thunder_runs import drop_inductor_code_caches
from fuzz.judge.verdict import check_spec
from fuzz.model_builder import build_example
from fuzz.run.batched import member_modules, run_thunderfx_batch
from fuzz.run.runner import CompileReport, Deadline, HarnessError, time_limit
from fuzz.run.stops import interrupted

# At most this many members: each is a recompile of the same module-call code, and past dynamo's recompile limit (8)
# the later members would run eagerly.
MAX_BATCH = 8


def batchable(spec: NetSpec) -> bool:
    """Whether ``spec`` can be judged in a batch: one forward and backward of a deterministic network of layers (a
    random one is judged against its own thunderfx run without checkpoints, a model or training steps alone)."""
    return not spec.random and spec.training is None and spec.model is None


def _member_report(batch: CompileReport, spec: NetSpec) -> CompileReport:
    """What a member's report can say of a batch thunder compiled all of: its regions compiled, no bytes measured."""
    return CompileReport(graphs=batch.graphs, thunder_checkpoints=spec.checkpoint_regions, saved_bytes=None)


def judged_in_batch(
    specs: Sequence[NetSpec],
    converter: str,
    timeout_s: float | None,
    batch_timeout_s: float | None = None,
    deadline: float = math.inf,
) -> list[Outcome | None]:
    """Per `batchable` spec of ``specs``, its outcome judged from one thunderfx run of them all (the ``converter``'s;
    the fixed one for "both", whose stock run each member then has alone), under ``batch_timeout_s`` (default
    ``timeout_s`` per member); None where it must be run alone: it failed there, the batch did not run to the end, or
    thunder did not compile all of the batch (a member dynamo ran eagerly would pass unjudged). A member's further
    runs (`check_spec`'s ``deadline``) that the deadline cuts short leave it None too."""
    modules = member_modules(len(specs))
    examples = [build_example(spec, module=module) for spec, module in zip(specs, modules, strict=True)]
    start = time.perf_counter()
    try:
        with (
            use_converter("fixed" if converter == "both" else converter),
            time_limit(batch_timeout_s or (None if timeout_s is None else timeout_s * len(specs))),
        ):
            results, report = run_thunderfx_batch(examples, modules)
    except HarnessError:
        raise
    except (Deadline, Exception):
        if interrupted():  # the run is being stopped; thunder may have wrapped the KeyboardInterrupt
            raise KeyboardInterrupt("interrupted while thunder ran a batch") from None
        drop_inductor_code_caches()  # (a time-out inside inductor, as for one network)
        return [None] * len(specs)
    share_s = (time.perf_counter() - start) / len(specs)  # each member's part of the batch's thunder time
    if not report.compiled_everything(sum(spec.checkpoint_regions for spec in specs)):
        return [None] * len(specs)
    outcomes: list[Outcome | None] = []
    for spec, result in zip(specs, results, strict=True):
        first_run = (result, _member_report(report, spec), None)
        outcome = check_spec(spec, converter=converter, timeout_s=timeout_s, first_run=first_run, deadline=deadline)
        outcome = replace(outcome, seconds=outcome.seconds + share_s)
        outcomes.append(None if outcome.cut_short or outcome.failure is not None else outcome)
    return outcomes
