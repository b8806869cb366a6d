"""The campaign's pytest hooks, registered by `fuzz.campaign.plugin` at configure time: the campaign of each process
(its configuration from `fuzz.campaign.options`), the items of the families and their budget (`fuzz.campaign.items`),
signals, progress lines, a dead xdist worker, the summary; and the fixtures."""

from __future__ import annotations

import contextlib
import os
import threading
import warnings
from pathlib import Path

import pytest
from hypothesis import seed, settings
from hypothesis.errors import Unsatisfiable
from hypothesis.internal.reflection import function_digest

import fuzz.fix
from fuzz.campaign import options
from fuzz.campaign.database import adopt_examples
from fuzz.campaign.engine import Campaign
from fuzz.campaign.families import LEGACY_KEYS
from fuzz.campaign.gpus import VISIBLE_DEVICES, gpu_of_worker
from fuzz.campaign.items import budget_weight, family_of, in_shard_order, item_name, left_out, part_of, sweeps
from fuzz.campaign.profiles import seed_generation
from fuzz.report.html import write_report
from fuzz.report.summary import FINDING, HARNESS_ERROR, item_properties, summary_lines
from fuzz.run.stops import at_safe_points, defer_interrupts, install_stop_handler, interrupted, stop_if_interrupted
from fuzz.versions.compat import incompatibility

CAMPAIGN = pytest.StashKey[Campaign]()
PROGRESS = pytest.StashKey[threading.Event]()
OUT_OF_BUDGET = pytest.StashKey[bool]()


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    if reason := incompatibility():
        raise pytest.UsageError(reason)
    campaign_config = options.campaign_config(config)
    if campaign_config.converter != "stock":
        try:
            fuzz.fix.fixed_converter()
        except fuzz.fix.StaleFixError as error:
            raise pytest.UsageError(str(error)) from None
    workers = getattr(config, "workerinput", {}).get("workercount", 1)
    worker = options.worker_id(config)
    if worker is not None:
        _share_cores(workers)
    campaign = Campaign(campaign_config, workers=workers, worker=worker or "main")
    config.stash[CAMPAIGN] = campaign
    # Pinned by `fuzz.campaign.plugin`: what this worker really sees.
    if "fuzz_gpu" in getattr(config, "workerinput", {}):
        campaign.stats.gpus[campaign.worker] = os.environ[VISIBLE_DEVICES]
    install_stop_handler()
    if worker is None:
        config.pluginmanager.register(_ItemRecorder(campaign), "fuzz-item-recorder")
        if (every := config.getoption("fuzz_progress")) > 0:
            config.stash[PROGRESS] = _start_progress(config, campaign, every)


def _share_cores(workers: int) -> None:
    """Give each of ``workers`` xdist processes its share of the cores for torch's intra-op threads.

    Each process would otherwise start one OpenMP thread per core: with as many workers as cores,
    the spinning threads of one worker steal the cores the others compile on (measured: -n 2 on
    2 cores was no faster than -n 0).
    """
    import torch

    torch.set_num_threads(max(1, (os.cpu_count() or 1) // workers))


@pytest.hookimpl(optionalhook=True)  # an xdist hook: unknown when xdist is off (-p no:xdist)
def pytest_configure_node(node) -> None:
    """xdist: every worker generates from the controller's seed and writes to its run folder."""
    campaign_config = node.config.stash[CAMPAIGN].config
    node.workerinput["fuzz_seed"] = campaign_config.seed
    node.workerinput["fuzz_run_id"] = campaign_config.run_id
    node.workerinput["fuzz_device"] = campaign_config.device
    node.workerinput["fuzz_started_at"] = campaign_config.started_at
    if campaign_config.gpus:
        node.workerinput["fuzz_gpu"] = gpu_of_worker(node.workerinput["workerid"], campaign_config.gpus)


@pytest.hookimpl(optionalhook=True)
def pytest_handlecrashitem(crashitem: str, report: pytest.TestReport, sched) -> None:
    """xdist: a worker died; report the network it was running (xdist starts a new worker, the campaign goes on): a
    thunder finding when it died inside thunder, else a harness error naming the phase (`Campaign.record_worker_crash`).

    A worker that a signal of its own stopped (xdist takes its exit status 2 for a crash too) did not die: its item
    is listed as interrupted, nothing else (the run ends as interrupted)."""
    campaign = report.node.config.stash[CAMPAIGN]
    if getattr(report.node, "workeroutput", {}).get("exitstatus") == pytest.ExitCode.INTERRUPTED:
        report.user_properties += [("fuzz_campaign_item", True), ("fuzz_interrupted", True)]
        return
    dead = campaign.record_worker_crash(report.node.gateway.id)
    if isinstance(dead, Path):
        failure = (dead / "failure.txt").read_text()
        report.longrepr = f"{report.longrepr}\nwhile running the network in {dead}: {failure}"
    if dead is None and "test_ckpt_grad_parity.py::" not in crashitem:  # ("fuzz/" only from the checkout)
        return  # a self-test's worker: an ordinary failed test
    message = dead if isinstance(dead, str) else f"the worker process died outside an example: {report.longrepr}"
    report.user_properties += [
        ("fuzz_campaign_item", True),
        ("fuzz_failure_kind", FINDING if isinstance(dead, Path) else HARNESS_ERROR),
        ("fuzz_failure_message", message),
    ]


def _start_progress(config: pytest.Config, campaign: Campaign, every: float) -> threading.Event:
    """Print `Campaign.progress_line` every ``every`` seconds until the returned event is set."""
    stop = threading.Event()

    def report() -> None:
        while not stop.wait(every):
            reporter = config.pluginmanager.get_plugin("terminalreporter")
            if reporter is not None and (line := campaign.progress_line()):
                reporter.write_line(line)

    threading.Thread(target=report, name="fuzz-progress", daemon=True).start()
    return stop


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "shard" in metafunc.fixturenames:
        shards = metafunc.config.stash[CAMPAIGN].config.shards
        metafunc.parametrize("shard", range(shards), ids=[f"shard{i}" for i in range(shards)])


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Deselected (one count, not a skip per item): registry re-tests unless ``--known-issues check``, the items the
    campaign leaves out (`fuzz.campaign.items.left_out`: families not chosen or not of this profile or budget); then
    the campaign's items shard by shard."""
    campaign = config.stash[CAMPAIGN]
    deselected = [
        item
        for item in items
        if getattr(item, "originalname", None) == "test_known_issue_still_reproduces"
        and campaign.config.known_issues != "check"
        or left_out(item, campaign.config)
    ]
    if deselected:
        config.hook.pytest_deselected(items=deselected)
        items[:] = [item for item in items if item not in deselected]
    in_shard_order(items)


def pytest_collection_finish(session: pytest.Session) -> None:
    """The budget is shared by the campaign's items that were selected (some families, or all), the op sweep's sized
    by the cases of its selected shards (`fuzz.campaign.budget.ItemBudget.set_items`)."""
    campaign = session.config.stash[CAMPAIGN]
    sweep_shards = [part_of(item) for item in session.items if sweeps(item)]
    cases = sum(len(campaign.sweep_cases(shard)) for shard in sweep_shards) if campaign.config.minutes else 0
    weights = [budget_weight(item, campaign.config.shards) for item in session.items if part_of(item) is not None]
    campaign.budget.set_items(sum(weights), len(sweep_shards), cases)


def pytest_runtest_setup(item: pytest.Item) -> None:
    stop_if_interrupted()  # (a signal that came while an item ran, after its last safe point)
    campaign = item.config.stash[CAMPAIGN]
    campaign.start_item(sweeps(item), budget_weight(item, campaign.config.shards))
    if (part := part_of(item)) is None or not hasattr(item.obj, "hypothesis"):  # the op sweep: no Hypothesis
        return
    if settings.default.derandomize:
        # Derandomized runs (no database) seed every parametrization alike; give each part its own.
        seed(campaign.config.seed + part)(item.obj)
    else:
        seed_generation(campaign.config.seed + part)


def pytest_pyfunc_call(pyfuncitem: pytest.Function) -> None:
    """Before a family's test runs (inside Hypothesis's pytest plugin, which has given it its database key), what the
    database holds under the key its test had before the family table is moved to its key (`LEGACY_KEYS`)."""
    database = settings.default.database
    if family_of(pyfuncitem) is None or database is None or (old := LEGACY_KEYS.get(item_name(pyfuncitem))) is None:
        return
    key = function_digest(pyfuncitem.obj.hypothesis.inner_test)  # Hypothesis's own key of the test
    adopt_examples(database, bytes.fromhex(old), key)


def pytest_runtest_teardown(item: pytest.Item) -> None:
    if part_of(item) is not None:
        item.config.stash[CAMPAIGN].stats.item_ended()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item):
    """A shard whose budget ran out before Hypothesis generated a valid example ends cleanly.

    Out of budget, every call ends at once (`mark_overrun`); Hypothesis then says that nothing
    satisfied the test, whatever point it was at (replaying the database, after an explicit
    example, before its first draw): no failure of the campaign. It is raised with budget left,
    or when every network the item ran was invalid (a harness that rejects everything). The
    other complaint, that the smallest input overran, is suppressed in every profile.
    """
    try:
        with at_safe_points() if "campaign" in getattr(item, "fixturenames", ()) else contextlib.nullcontext():
            return (yield)
    except Unsatisfiable:
        campaign = item.config.stash[CAMPAIGN]
        if part_of(item) is None or campaign.budget.may_generate() or campaign.budget.found_only_invalid_networks():
            raise
        item.stash[OUT_OF_BUDGET] = True
        return None


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> pytest.TestReport:
    """Tell the controller how a campaign item ended: a finding, a harness error, out of budget (`ItemResults`)."""
    report = yield
    if "campaign" in getattr(item, "fixturenames", ()) and (report.when == "call" or report.failed):
        error = call.excinfo.value if report.failed and call.excinfo is not None else None
        report.user_properties += [
            ("fuzz_campaign_item", True),
            *item_properties(error, item.stash.get(OUT_OF_BUDGET, False)),
        ]
    return report


class _ItemRecorder:
    """The controller's (or the only process's) record of how each item ended, for the summary's result line."""

    def __init__(self, campaign: Campaign) -> None:
        self.campaign = campaign

    def pytest_warning_recorded(self, warning_message: warnings.WarningMessage) -> None:
        self.campaign.items.record_warning(f"{warning_message.category.__name__}: {warning_message.message}")

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        properties = dict(report.user_properties)
        self.campaign.items.record(report.nodeid, report.when, report.failed, properties)


@pytest.fixture(scope="session")
def campaign(request: pytest.FixtureRequest) -> Campaign:
    """The campaign of this process: configuration, budget, statistics, artifacts."""
    return request.config.stash[CAMPAIGN]


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_sessionfinish(session: pytest.Session):
    """Around everything that ends the session (the terminal reporter's summary included): from here on a signal
    no longer raises (`fuzz.run.stops.defer_interrupts`), and the run exits as its written summary says (a signal came
    before it was written: 2, "interrupted"; after: what the summary says)."""
    defer_interrupts()
    if progress := session.config.stash.get(PROGRESS, None):
        progress.set()
    campaign = session.config.stash.get(CAMPAIGN, None)
    stats = campaign.stats if campaign is not None else None
    # Also a campaign item stopped before it counted anything: the controller writes a summary only from counters.
    if stats is not None and (stats.items_started_at or stats.known_issue_checks or stats.gpus):
        campaign.write_worker_stats()
    try:
        return (yield)
    finally:
        if campaign is not None and campaign.summary_exit_status is not None:
            session.exitstatus = campaign.summary_exit_status
        elif interrupted():
            session.exitstatus = pytest.ExitCode.INTERRUPTED


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    campaign = config.stash.get(CAMPAIGN, None)
    if campaign is None or options.worker_id(config) is not None:
        return
    summary = campaign.summary(int(exitstatus))
    if summary is not None:
        terminalreporter.section("fuzz campaign summary")
        for line in summary_lines(summary):
            terminalreporter.write_line(line)
        terminalreporter.write_line(f"run folder: {campaign.config.run_dir} (summary.json, failures)")
        if campaign.latest_problem:
            terminalreporter.write_line(f"note: {campaign.latest_problem}")
        try:
            terminalreporter.write_line(f"report: {write_report(campaign.config.run_dir)}")
        except Exception as error:  # the verdict stands, written in summary.json; the page is a view of it
            terminalreporter.write_line(f"REPORT NOT WRITTEN (a bug of ours): {type(error).__name__}: {error}")


@pytest.fixture
def fixed_converter():
    """Thunder runs with the meta-preserving checkpoint converter for the test, then the previous one is back."""
    from fuzz.fix import use_converter

    with use_converter("fixed") as converter:
        yield converter
