"""One run, one folder: ``<root>/<run-id>/`` holds all the run writes; ``<root>/latest`` links to the newest.

Inside a run folder: ``summary.json``, ``report.html``, ``converter_ab.jsonl`` (one A/B record per
example), one ``<failure-id>/`` per final failure, ``unshrunk/`` (failures at first sight), and
``.workers/`` (each process's counters and the network it is running, for a worker that dies).
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fuzz.cache import write_atomically

if TYPE_CHECKING:
    from fuzz.generate.spec import NetSpec
    from fuzz.report.stats import CampaignStats

LATEST = "latest"
SUMMARY = "summary.json"
AB_RECORDS = "converter_ab.jsonl"
FAILURE_RECORD = "failure.json"  # in each failure folder: what the summary lists of it
UNSHRUNK = "unshrunk"
REDUCING = "reducing"  # <reducing>-<worker>-<failure id>/: a shrunk failure while its process reduces it further
DIED_OUTSIDE_THUNDER = "died-outside-thunder"  # networks a worker died on in eager PyTorch or our own steps
_WORKERS = ".workers"


def new_run_id(profile: str) -> str:
    """A fresh run id: UTC time, profile and a random suffix (``20261130-190512-nightly-3fa9``), sortable by time."""
    return f"{time.strftime('%Y%m%d-%H%M%S', time.gmtime())}-{profile}-{secrets.token_hex(2)}"


def check_run_id(run_id: str) -> None:
    """Raise ValueError unless ``run_id`` can name a folder of its own."""
    if not run_id or run_id in (LATEST, ".", "..") or "/" in run_id or os.sep in run_id:
        raise ValueError(f"--fuzz-run-id {run_id!r}: a run id is one folder name, not {LATEST!r}, '.' or a path")


def find_run(root: Path, run: str | None = None) -> Path:
    """The folder of ``run`` (a run id under ``root``, or a path to a run folder; default: ``root/latest``).

    Raises FileNotFoundError with a one-line message saying what exists instead.
    """
    candidates = [Path(run), root / run] if run else [root / LATEST]
    for candidate in candidates:
        if (candidate / SUMMARY).is_file():
            return candidate.resolve()
    runs = sorted(path.parent.name for path in root.glob(f"*/{SUMMARY}") if not path.parent.is_symlink())
    listed = f"runs under {root}: {', '.join(runs[-5:])}" if runs else f"no run under {root}"
    raise FileNotFoundError(f"no run folder with a {SUMMARY} at {run or root / LATEST}; {listed}")


class RunFolder:
    """The files of one run (``path``), written by any of its processes; every write is atomic or one short append."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._running: dict[str, dict[str, Any]] = {}  # this process's in-flight records, by worker

    @property
    def summary_path(self) -> Path:
        return self.path / SUMMARY

    def _worker_path(self, worker: str, suffix: str) -> Path:
        directory = self.path / _WORKERS
        directory.mkdir(parents=True, exist_ok=True)
        return directory / f"{worker}.{suffix}"

    def write_worker_stats(self, worker: str, stats: CampaignStats) -> None:
        write_atomically(self._worker_path(worker, "json"), json.dumps(stats.to_dict()))

    def mark_item_started(self, worker: str, sweep: bool, weight: float) -> tuple[float, float]:
        """Note that ``worker`` started a test item (one of the op sweep's, or another of budget ``weight``); returns
        what all processes have started so far: the sweep's items, the other items' weights (`fuzz.campaign.budget`)."""
        path = self._worker_path(worker, "items")
        started = json.loads(path.read_text()) if path.exists() else [0.0, 0.0]
        started[0 if sweep else 1] += 1 if sweep else weight
        write_atomically(path, json.dumps(started))
        totals = [0.0, 0.0]
        for other in (self.path / _WORKERS).glob("*.items"):
            try:
                totals = [a + b for a, b in zip(totals, json.loads(other.read_text()), strict=True)]
            except (OSError, ValueError):  # (another process writing it: atomically, so only in a race with its rename)
                continue
        return totals[0], totals[1]

    def merged_stats(self) -> CampaignStats | None:
        """Every process's counters as last written, merged; None when none was written."""
        from fuzz.report.stats import CampaignStats

        paths = sorted((self.path / _WORKERS).glob("*.json"))
        if not paths:
            return None
        merged = CampaignStats()
        for path in paths:
            merged.merge(CampaignStats.from_dict(json.loads(path.read_text())))
        return merged

    @contextlib.contextmanager
    def running(self, worker: str, spec: NetSpec, limit_s: float | None) -> Iterator[None]:
        """Record ``spec`` as the network ``worker`` is running under time limit ``limit_s``, for `take_running`
        should the process die; its phase (`fuzz.run.runner.in_phase`) is added by `mark_phase`."""
        path = self._worker_path(worker, "inflight")
        self._running[worker] = {"spec": spec.to_json(), "started": time.time(), "phase": None, "limit_s": limit_s}
        write_atomically(path, json.dumps(self._running[worker]))
        try:
            yield
        finally:
            path.unlink(missing_ok=True)
            del self._running[worker]

    def mark_phase(self, worker: str, phase: str | None) -> None:
        """Note in ``worker``'s in-flight record (if it runs a network) which phase of the example it is in."""
        if (record := self._running.get(worker)) is not None and record["phase"] != phase:
            record["phase"] = phase
            write_atomically(self._worker_path(worker, "inflight"), json.dumps(record))

    def take_running(self, worker: str) -> tuple[NetSpec, float, str | None, float | None] | None:
        """The network dead ``worker`` was running, for how many seconds, in which phase, under which time limit
        (its record removed); None if none."""
        from fuzz.generate.spec import NetSpec

        path = self.path / _WORKERS / f"{worker}.inflight"
        if not path.exists():
            return None
        record = json.loads(path.read_text())
        path.unlink()
        return NetSpec.from_json(record["spec"]), time.time() - record["started"], record["phase"], record["limit_s"]

    def written_failures(self, unshrunk: bool = False) -> list[dict[str, Any]]:
        """The records of the failure folders on disk: the final ones (each network of one id, its variants too), or
        those under ``unshrunk/`` (first sight, not shrunk yet): what a run stopped early had found."""
        root = self.path / UNSHRUNK if unshrunk else self.path
        records = sorted(root.glob(f"*/{FAILURE_RECORD}")) + sorted(root.glob(f"*/variants/*/{FAILURE_RECORD}"))
        return [json.loads(path.read_text()) for path in records]

    def append_ab_record(self, record: dict[str, Any]) -> None:
        """One line of ``converter_ab.jsonl`` (a short append is atomic between processes)."""
        self.path.mkdir(parents=True, exist_ok=True)
        with open(self.path / AB_RECORDS, "a") as records:
            records.write(json.dumps(record) + "\n")

    def write_summary(self, summary: dict[str, Any]) -> str | None:
        """Write ``summary.json``, point ``<root>/latest`` at this run; returns why ``latest`` could not be, if so."""
        self.path.mkdir(parents=True, exist_ok=True)
        write_atomically(self.summary_path, json.dumps(summary, indent=2) + "\n")
        return self.point_latest_here()

    def point_latest_here(self) -> str | None:
        """Make ``<root>/latest`` a relative link to this run (replaced atomically: concurrent runs never break it).

        Returns why it could not (``latest`` is a real folder, or the file system has no symbolic links), else None:
        the run and its summary are written either way.
        """
        latest = self.path.parent / LATEST
        link = latest.with_name(f".{LATEST}.{os.getpid()}")
        try:
            link.unlink(missing_ok=True)
            link.symlink_to(self.path.name)
            os.replace(link, latest)
        except OSError as error:
            return f"{latest} not pointed at this run: {error}"
        return None
