"""A failure's folder: its id, spec.json, repro.py, upstream.py, failure.txt, triage.txt and failure.json; its
confirmation in a fresh interpreter (repro.py, then upstream.py, whose verdict goes into its issue.md)."""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from fuzz.generate.reduce import PLUMBING, in_no_op
from fuzz.generate.spec import NetSpec
from fuzz.judge.failures import ParityFailure, ThunderCrash
from fuzz.report.clusters import cluster_of
from fuzz.report.issue_draft import Draft, issue_markdown
from fuzz.report.repro import repro_source
from fuzz.report.run_folder import FAILURE_RECORD, write_atomically
from fuzz.report.stats import Confirmation
from fuzz.report.upstream import upstream_source
from fuzz.run.stops import stop_if_interrupted


def spec_digest(spec: NetSpec) -> str:
    """A short hash of the whole spec."""
    return hashlib.sha1(spec.to_json().encode()).hexdigest()[:12]


def failure_id(spec: NetSpec, failure: ParityFailure) -> str:
    """A stable id for a bug: failure class, triage label and a hash of what tells this failure apart.

    The hash covers the layer kinds (an op layer's call), the checkpoint APIs, the dtype, and what
    failed: thunder's exception type and message (numbers blanked) for a crash, the tensors that did
    not match otherwise. Not sizes or seed, so two shards that shrink the same bug to slightly
    different networks name it alike; `write_failure` keeps both networks.
    """
    essence = {
        # An op layer by its callable (which names the form) and keyword arguments: each op's bug gets its own id.
        "layers": [
            [layer.kind, layer.params["target"], layer.params["kwargs"]] if "op" in layer.params else layer.kind
            for layer in spec.layers
        ],
        "checkpoints": [c.api for c in spec.checkpoints],
        "dtype": spec.dtype,
        "what": _what_failed(failure),
    }
    if spec.is_program:  # (a stack's id is as before programs)
        essence |= {"reads": [layer.reads for layer in spec.layers], "outputs": spec.outputs}
    if spec.training is not None:  # (one forward and backward: an id as before training)
        essence["training"] = spec.training.optimizer
    digest = hashlib.sha1(json.dumps(essence, sort_keys=True).encode()).hexdigest()[:8]
    return f"{failure.signature}-{digest}"


def _what_failed(failure: ParityFailure) -> list[str]:
    """A crash's `ThunderCrash.crash_signature`; else the names of the tensors that differ."""
    lines = str(failure).splitlines()
    if isinstance(failure, ThunderCrash):
        return [failure.crash_signature]
    names = {line.partition(":")[0] for line in lines if line.startswith(("output:", "output at", "grad of "))}
    return sorted({re.sub(r" at step \d+$", " at a later step", name) for name in names})


def write_failure(
    artifacts: Path,
    spec: NetSpec,
    failure: ParityFailure,
    converter: str,
    name: str | None = None,
    executors: Sequence[str] = (),
    listed: bool = True,
    reduced: bool = False,
) -> Path:
    """Write ``<artifacts>/<name or failure-id>/{spec.json,repro.py,failure.txt,triage.txt}`` and, for a failure a
    run's summary lists (``listed``; not a registry entry), ``failure.json`` (``reduced``: see `failure_record`);
    returns the directory.

    Never overwrites another network: when the folder already holds a different spec (the same bug,
    shrunk to another network), this one goes to its ``variants/<spec digest>/`` folder instead.
    """
    directory = artifacts / (name or failure_id(spec, failure))
    spec_json = spec.to_json() + "\n"
    if (directory / "spec.json").exists() and (directory / "spec.json").read_text() != spec_json:
        directory = directory / "variants" / spec_digest(spec)
    directory.mkdir(parents=True, exist_ok=True)
    write_atomically(directory / "spec.json", spec_json)
    write_atomically(directory / "repro.py", repro_source(spec, failure, converter, executors))
    try:
        upstream = upstream_source(spec, failure, _title(spec, failure), _thunder_version())
    except Exception as error:  # (none in 1,500 drawn networks) the finding and its repro.py must not be lost to it
        upstream = f"# upstream.py could not be written: {type(error).__name__}: {error}\nraise SystemExit(2)\n"
    write_atomically(directory / UPSTREAM, upstream)
    write_atomically(
        directory / "failure.txt",
        "".join(f"{line}\n" for line in [f"{type(failure).__name__}: {failure}", *failure.resembles]),
    )
    write_atomically(directory / "triage.txt", f"{failure.triage}: {failure.__cause__}\n")
    if listed:
        write_atomically(
            directory / FAILURE_RECORD, json.dumps(failure_record(spec, failure, directory, reduced)) + "\n"
        )
    return directory


def failure_record(spec: NetSpec, failure: ParityFailure, directory: Path, reduced: bool = False) -> dict[str, Any]:
    """What the summary lists of a failure written to ``directory`` (also its ``failure.json``). Only a ``reduced``
    network blames its ops (each op's identity twin passed there): one found, left by a dead worker or whose reduction
    the end of the budget cut short was not (a make campaign's unshrunk finding blamed logsumexp, whose result its
    network never used)."""
    return {
        "id": failure_id(spec, failure),
        "class": failure.failure_class,
        "triage": failure.triage,
        "message": str(failure).splitlines()[0] if str(failure) else "",
        "repro": str(directory.resolve() / "repro.py"),  # absolute: the report links it from anywhere
        # The known issues its spec matches whose signature or band it falls outside (`fuzz.campaign.engine.record`).
        "resembles": list(failure.resembles),
        "blames": blames(spec) if reduced else None,
        **cluster_of(spec, failure, reduced),
    }


def blames(spec: NetSpec) -> str | None:
    """What a failure blames (None where nothing can be said): the ops left in its network (each one's identity twin
    and stand-in passed there, `fuzz.generate.reduce`), the plumbing where an op was replaced by identity and the
    failure stayed, and no op where every layer was replaced by a stand-in and it stayed."""
    named = [f"op {layer.params['op']}" for layer in spec.layers if "op" in layer.params]
    if any(layer.kind == PLUMBING for layer in spec.layers):
        named.append("the op family's plumbing (adapt, fold) with the op replaced by identity")
    if in_no_op(spec):
        named.append("no op: it fails with every op replaced by another of the same shape and arity")
    return ", ".join(named) or None


_POLL_S = 0.2  # how often the wait for a confirming script looks for a stop

# Failures whose repro.py a campaign runs to confirm them (exit 1): not a time-out's, which takes its whole time
# limit to say "reproduced", nor a dead worker's, which crashes.
UPSTREAM = "upstream.py"
CONFIRMABLE = ("forward-divergence", "gradient-divergence", "state-divergence", "accuracy", "memory", "thunder-crash")


def confirm(directory: Path, failure: ParityFailure, timeout_s: float) -> Confirmation:
    """Run ``directory/repro.py`` in a fresh interpreter; confirmed when it exits 1 (the same failure reproduced).

    Only for `CONFIRMABLE` failures (others are not run). The repro's output goes to ``confirmation.txt``.
    """
    if failure.failure_class not in CONFIRMABLE:
        return Confirmation(
            None, f"not checked: a {failure.failure_class}'s repro runs out its time limit or crashes; run it by hand"
        )
    start = time.perf_counter()
    status, output = _run_script(directory, "repro.py", timeout_s)
    seconds = round(time.perf_counter() - start, 2)
    confirmed = status == 1
    how = f"timed out after {timeout_s:g} s" if status is None else f"exit status {status}"
    verdict = "reproduced in a fresh interpreter" if confirmed else "NOT reproduced in a fresh interpreter"
    write_atomically(directory / "confirmation.txt", f"{verdict} ({how}, {seconds} s)\n\n{output[-20000:]}")
    if confirmed and (directory / UPSTREAM).exists():  # within what is left of the same limit
        how += f"; upstream.py: {_run_upstream(directory, failure, max(1.0, timeout_s - seconds))}"
    return Confirmation(confirmed, f"{verdict} ({how})", seconds)


def _run_upstream(directory: Path, failure: ParityFailure, timeout_s: float) -> str:
    """Run the folder's upstream.py once (fresh interpreter) and write its issue.md with the exit status; returns
    what it did, in words. Its exit status is a repro's: 1 the failure shows there too."""
    status, _ = _run_script(directory, UPSTREAM, timeout_s)
    exits = {} if status is None else {_thunder_version(): status}
    spec = NetSpec.from_json((directory / "spec.json").read_text())
    draft = Draft(
        _title(spec, failure), str(failure).splitlines()[0], failure, (directory / UPSTREAM).read_text(), exits,
        origin=f"campaign failure {directory.name}",
    )  # fmt: skip
    write_atomically(directory / "issue.md", issue_markdown(draft))
    return (
        "timed out"
        if status is None
        else {1: "shows it (exit 1)", 0: "does not show it (exit 0)"}.get(status, f"could not run it (exit {status})")
    )


def _title(spec: NetSpec, failure: ParityFailure) -> str:
    return cluster_of(spec, failure)["cluster_label"]


def _thunder_version() -> str:
    import thunder

    return thunder.__version__


def _run_script(directory: Path, script: str, timeout_s: float) -> tuple[int | None, str]:
    """``directory/script`` run in a fresh interpreter: its exit status (None: killed after ``timeout_s``) and output.
    Waiting for it is a safe point of a stopped run (`fuzz.run.stops`) every `_POLL_S`: the script is killed there."""
    end = time.monotonic() + timeout_s
    pipe = subprocess.PIPE
    with subprocess.Popen([sys.executable, script], cwd=directory, stdout=pipe, stderr=pipe, text=True) as process:
        try:
            while True:
                try:
                    output = "".join(process.communicate(timeout=_POLL_S))
                    stop_if_interrupted()  # (a signal to the whole process group ended the script too)
                    return process.returncode, output
                except subprocess.TimeoutExpired:
                    stop_if_interrupted()
                    if time.monotonic() > end:
                        process.kill()
                        return None, "".join(process.communicate())
        except KeyboardInterrupt:
            process.kill()
            raise
