"""The campaign's pytest hooks, registered by `fuzz.campaign.plugin` at configure time: option checks, the campaign
of each process, shards and their budget, signals, progress lines, a dead xdist worker, the summary; and the
fixtures."""

from __future__ import annotations

import contextlib
import os
import random
import threading
import warnings
from pathlib import Path

import pytest
from hypothesis import seed, settings
from hypothesis.errors import Unsatisfiable

import fuzz.fix
from fuzz.campaign.config import CampaignConfig, resolve_device
from fuzz.campaign.database import DatabaseError, default_location, open_database
from fuzz.campaign.engine import Campaign
from fuzz.campaign.gpus import VISIBLE_DEVICES, checked_workers_per_gpu, gpu_of_worker, visible_gpus
from fuzz.campaign.items import budget_weight, in_shard_order, shard_of, sweeps, zoo_shard
from fuzz.campaign.profiles import PROFILES, register_profiles, seed_generation
from fuzz.generate.draws import OP_KINDS
from fuzz.generate.layers import LAYER_KINDS
from fuzz.generate.op_catalog import catalog
from fuzz.generate.spec import DTYPES
from fuzz.judge.batch import MAX_BATCH
from fuzz.report.html import write_report
from fuzz.report.run_folder import check_run_id, new_run_id
from fuzz.report.summary import FINDING, HARNESS_ERROR, command_line, item_properties, started_at, summary_lines
from fuzz.run.runner import executor_names, use_executors
from fuzz.run.stops import at_safe_points, defer_interrupts, install_stop_handler, interrupted, stop_if_interrupted
from fuzz.versions.compat import incompatibility

CAMPAIGN = pytest.StashKey[Campaign]()
PROGRESS = pytest.StashKey[threading.Event]()
OUT_OF_BUDGET = pytest.StashKey[bool]()


def _choice_list(config: pytest.Config, name: str, known) -> tuple[str, ...] | None:
    """The comma-separated values of option ``name``, each checked against ``known``."""
    if (value := config.getoption(name)) is None:
        return None
    chosen = tuple(v.strip() for v in value.split(",") if v.strip())
    unknown = [v for v in chosen if v not in known]
    if unknown or not chosen:
        problem = f"unknown {', '.join(unknown)}" if unknown else "empty list"
        raise pytest.UsageError(f"--{name.replace('_', '-')}: {problem}; choose from {', '.join(known)}")
    return chosen


def _worker_id(config: pytest.Config) -> str | None:
    workerinput = getattr(config, "workerinput", None)
    return None if workerinput is None else workerinput["workerid"]


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    if reason := incompatibility():
        raise pytest.UsageError(reason)
    for name in ("fuzz_minutes", "fuzz_timeout"):
        value = config.getoption(name)
        if value is not None and value <= 0:
            raise pytest.UsageError(f"--{name.replace('_', '-')} must be positive, got {value}")
    for name, most in (("fuzz_shards", ""), ("fuzz_batch", MAX_BATCH), ("fuzz_max_dim", "")):
        if not 1 <= (value := config.getoption(name)) <= (most or value):
            bounds = f"at least 1{most and f' and at most {most}'}"
            raise pytest.UsageError(f"--{name.replace('_', '-')} must be {bounds}, got {value}")
    try:
        # A worker takes the controller's device: pinned to a GPU that is not there, "auto" would quietly become cpu.
        device = getattr(config, "workerinput", {}).get("fuzz_device") or resolve_device(
            config.getoption("fuzz_device")
        )
    except ValueError as error:
        raise pytest.UsageError(str(error)) from None
    location = config.getoption("fuzz_database") or default_location()
    try:
        database = open_database(location)
    except DatabaseError as error:
        raise pytest.UsageError(f"--fuzz-database: {error}") from None
    register_profiles(database)
    profile = config.getoption("hypothesis_profile", None) or "dev"
    if profile not in PROFILES:
        raise pytest.UsageError(f"--hypothesis-profile {profile!r} is not one of {', '.join(PROFILES)}")
    settings.load_profile(profile)
    try:
        executors = executor_names(config.getoption("fuzz_executors"), device)
    except ValueError as error:
        raise pytest.UsageError(str(error)) from None
    use_executors(executors)
    kinds = _choice_list(config, "fuzz_layers", [name for name, kind in LAYER_KINDS.items() if kind.drawn])
    dtypes = _choice_list(config, "fuzz_dtypes", DTYPES)
    if _worker_id(config) is None and any(kind in (kinds or OP_KINDS) for kind in OP_KINDS):
        catalog()  # built (or read) once here, before xdist starts workers that would all build it at once
    ops = _choice_list(config, "fuzz_ops", catalog().ops) if config.getoption("fuzz_ops") else None
    workers = getattr(config, "workerinput", {}).get("workercount", 1)
    if _worker_id(config) is not None:
        _share_cores(workers)
    run_id = _run_id(config, profile)
    try:
        gpus = _gpus(config, device)
    except ValueError as error:
        raise pytest.UsageError(str(error)) from None
    campaign_config = CampaignConfig(
        seed=_campaign_seed(config, profile),
        executors=executors,
        device=device,
        converter=config.getoption("converter"),
        run_dir=Path(config.getoption("fuzz_artifacts")) / run_id,
        run_id=run_id,
        database=location if "://" in location else str(Path(location).resolve()),
        command=command_line(config.invocation_params.args) if _worker_id(config) is None else "",
        minutes=config.getoption("fuzz_minutes"),
        started_at=getattr(config, "workerinput", {}).get("fuzz_started_at") or started_at(),
        timeout_s=config.getoption("fuzz_timeout"),
        shards=config.getoption("fuzz_shards"),
        profile=profile,
        kinds=kinds,
        dtypes=dtypes,
        ops=ops,
        known_issues="xfail" if config.getoption("known_issues") in (None, "exclude") else "check",
        confirm=config.getoption("fuzz_confirm") == "yes",
        batch=config.getoption("fuzz_batch"),
        max_dim=config.getoption("fuzz_max_dim"),
        gpus=gpus,
    )
    if campaign_config.converter != "stock":
        try:
            fuzz.fix.fixed_converter()
        except fuzz.fix.StaleFixError as error:
            raise pytest.UsageError(str(error)) from None
    campaign = Campaign(campaign_config, workers=workers, worker=_worker_id(config) or "main")
    config.stash[CAMPAIGN] = campaign
    # Pinned by `fuzz.campaign.plugin`: what this worker really sees.
    if "fuzz_gpu" in getattr(config, "workerinput", {}):
        campaign.stats.gpus[campaign.worker] = os.environ[VISIBLE_DEVICES]
    install_stop_handler()
    if _worker_id(config) is None:
        config.pluginmanager.register(_ItemRecorder(campaign), "fuzz-item-recorder")
        if (every := config.getoption("fuzz_progress")) > 0:
            config.stash[PROGRESS] = _start_progress(config, campaign, every)


def _gpus(config: pytest.Config, device: str) -> tuple[str, ...]:
    """The GPUs the controller spreads xdist workers over (`fuzz.campaign.gpus`): ``--fuzz-gpus``, else every visible
    GPU on CUDA; none for a worker, a run without xdist, or a CPU run without ``--fuzz-gpus``."""
    if _worker_id(config) is not None or not config.getoption("numprocesses", None):
        return ()
    checked_workers_per_gpu(config.getoption("fuzz_workers_per_gpu"))
    requested = config.getoption("fuzz_gpus")
    return visible_gpus(requested) if requested is not None or device == "cuda" else ()


def _share_cores(workers: int) -> None:
    """Give each of ``workers`` xdist processes its share of the cores for torch's intra-op threads.

    Each process would otherwise start one OpenMP thread per core: with as many workers as cores,
    the spinning threads of one worker steal the cores the others compile on (measured: -n 2 on
    2 cores was no faster than -n 0).
    """
    import torch

    torch.set_num_threads(max(1, (os.cpu_count() or 1) // workers))


def _run_id(config: pytest.Config, profile: str) -> str:
    """The run id of the controller (xdist workers get it from there): the option or a fresh one, never an old run."""
    if (chosen := getattr(config, "workerinput", {}).get("fuzz_run_id")) is not None:
        return chosen
    run_id = config.getoption("fuzz_run_id") or new_run_id(profile)
    try:
        check_run_id(run_id)
    except ValueError as error:
        raise pytest.UsageError(str(error)) from None
    folder = Path(config.getoption("fuzz_artifacts")) / run_id
    try:
        if config.getoption("fuzz_run_id"):  # claimed now: two runs given the same id cannot both take it
            folder.mkdir(parents=True)
        elif folder.exists():
            raise FileExistsError(folder)
    except FileExistsError:
        raise pytest.UsageError(f"--fuzz-run-id {run_id}: {folder} exists; a run never overwrites another") from None
    return run_id


def _campaign_seed(config: pytest.Config, profile: str) -> int:
    """The seed the controller chose (xdist workers get it from there), the option's, or a fresh one."""
    if (chosen := getattr(config, "workerinput", {}).get("fuzz_seed")) is not None:
        return chosen
    if (chosen := config.getoption("fuzz_seed")) is not None:
        return chosen
    return 0 if profile == "ci" else random.SystemRandom().randrange(2**32)


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
    """Deselected (one count, not a skip per item): registry re-tests unless ``--known-issues check``, each zoo
    architecture's test on all shards but its own (`zoo_shard`); then the campaign's items shard by shard."""
    campaign = config.stash[CAMPAIGN]
    deselected = [
        item
        for item in items
        if getattr(item, "originalname", None) == "test_known_issue_still_reproduces"
        and campaign.config.known_issues != "check"
        or (shard := zoo_shard(item, campaign.config.shards)) is not None
        and shard != shard_of(item)
    ]
    if deselected:
        config.hook.pytest_deselected(items=deselected)
        items[:] = [item for item in items if item not in deselected]
    in_shard_order(items)


def pytest_collection_finish(session: pytest.Session) -> None:
    """The budget is shared by the campaign's items that were selected (some families, or all), the op sweep's sized
    by the cases of its selected shards (`fuzz.campaign.budget.ItemBudget.set_items`)."""
    campaign = session.config.stash[CAMPAIGN]
    sweep_shards = [shard_of(item) for item in session.items if sweeps(item)]
    cases = sum(len(campaign.sweep_cases(shard)) for shard in sweep_shards) if campaign.config.minutes else 0
    weights = [budget_weight(item, campaign.config.shards) for item in session.items if shard_of(item) is not None]
    campaign.budget.set_items(sum(weights), len(sweep_shards), cases)


def pytest_runtest_setup(item: pytest.Item) -> None:
    stop_if_interrupted()  # (a signal that came while an item ran, after its last safe point)
    campaign = item.config.stash[CAMPAIGN]
    campaign.start_item(sweeps(item), budget_weight(item, campaign.config.shards))
    if (shard := shard_of(item)) is None or not hasattr(item.obj, "hypothesis"):  # the op sweep: no Hypothesis
        return
    if settings.default.derandomize:
        # Derandomized runs (no database) seed every parametrization alike; give each shard its own.
        seed(campaign.config.seed + shard)(item.obj)
    else:
        seed_generation(campaign.config.seed + shard)


def pytest_runtest_teardown(item: pytest.Item) -> None:
    if shard_of(item) is not None:
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
        if shard_of(item) is None or campaign.budget.may_generate() or campaign.budget.found_only_invalid_networks():
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
    if campaign is None or _worker_id(config) is not None:
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
