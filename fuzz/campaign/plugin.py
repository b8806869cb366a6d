"""The pytest plugin of the fuzz harness (entry point ``pytest11``): its options; the rest is `fuzz.campaign.hooks`.

pytest imports this module in every session of the environment, before it captures output: it imports
nothing heavy (torch and thunder imported that early crashed later subprocess runs with a segfault). Its
``pytest_configure`` registers `fuzz.campaign.hooks`, which then validates the options and builds the campaign.
"""

from __future__ import annotations

import logging
import os
import warnings

import pytest

from fuzz.campaign.choices import CONVERTER_CHOICES, DEFAULT_SHARDS, DEVICE_CHOICES, KNOWN_ISSUE_MODES
from fuzz.campaign.database import DEFAULT_LOCATION, ENVIRONMENT_VARIABLE
from fuzz.campaign.gpus import DEFAULT_WORKERS_PER_GPU
from fuzz.generate.draws import MAX_DIM
from fuzz.judge.limits import DEFAULT_TIMEOUT_S


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("fuzz", "checkpoint gradient-parity fuzzing")
    group.addoption("--fuzz-device", default="auto", choices=DEVICE_CHOICES, help="device of the generated networks")
    group.addoption(
        "--converter",
        default="fixed",
        choices=CONVERTER_CHOICES,
        help="checkpoint converter thunder uses: the meta-preserving fix, thunder's stock one, or both (A/B)",
    )
    group.addoption(
        "--fuzz-artifacts",
        default="fuzz-artifacts",
        help="root of the run folders: a campaign writes DIR/<run-id>/ (summary, failures, report), links DIR/latest",
    )
    group.addoption("--fuzz-run-id", default=None, help="this run's folder name (default: UTC time, profile, 4 hex)")
    group.addoption("--fuzz-minutes", type=float, default=None, help="wall-clock budget for generating new examples")
    group.addoption(
        "--fuzz-timeout", type=float, default=DEFAULT_TIMEOUT_S, help="seconds one example may take under thunderfx"
    )
    group.addoption(
        "--fuzz-shards", type=int, default=DEFAULT_SHARDS, help="test items the campaign is split into (for -n)"
    )
    group.addoption(
        "--fuzz-database",
        default=None,
        help="Hypothesis example database: a directory, or redis://host:port/db to share one across machines "
        f"(default: ${ENVIRONMENT_VARIABLE}, else {DEFAULT_LOCATION})",
    )
    group.addoption(
        "--fuzz-families",
        default=None,
        help="comma-separated families to run (names: fuzz.campaign.families; default: every one the profile and "
        "budget run)",
    )
    group.addoption("--fuzz-layers", default=None, help="comma-separated layer kinds to draw from (default: all)")
    group.addoption(
        "--fuzz-grad-modes",
        default=None,
        help="comma-separated grad modes a program's layers may run under: no_grad, enable_grad, inference_mode, "
        "autocast, or none (default: all)",
    )
    group.addoption(
        "--fuzz-catalog-nodes",
        default=None,
        choices=("yes", "no"),
        help="whether programs draw further inputs (inputs as state), torch's view ops and the op catalog's in-place "
        "updates (default: yes, but no under the ci profile)",
    )
    group.addoption(
        "--fuzz-structure",
        action="append",
        default=None,
        help="a data-flow structure every drawn program shows, named as the summary's coverage names it (e.g. "
        "'program update of an input'); repeat for several (each drawn program shows all); needs --fuzz-families "
        "program",
    )
    group.addoption("--fuzz-dtypes", default=None, help="comma-separated dtypes to draw from (default: all)")
    group.addoption(
        "--fuzz-ops",
        default=None,
        help="comma-separated ops of the op family to draw and sweep "
        "(names: python -m fuzz.generate.op_catalog; default: all)",
    )
    group.addoption(
        "--fuzz-seed",
        type=int,
        default=None,
        help="generation seed (shard i uses seed + i); default 0 under ci, else a fresh one, shown in the summary",
    )
    group.addoption(
        "--fuzz-executors",
        default="auto",
        help="thunder's executors, comma-separated; auto: cudnn and nvfuser (where installed) in front of thunder's "
        "defaults on CUDA, thunder's defaults on CPU",
    )
    group.addoption(
        "--fuzz-max-dim",
        type=int,
        default=MAX_DIM,
        help=f"the general family's widest feature dim (default {MAX_DIM}); 1 or 2 concentrates draws where truths "
        "cancel (width-1 features and normalizations, 1-wide outputs: docs/oracle.md)",
    )
    group.addoption(
        "--fuzz-batch",
        type=int,
        default=1,
        help="judge the general family's networks this many at a time, one thunderfx compile per batch (default 1: "
        "each alone); a member that fails in a batch is run alone, and the memory contract is not checked in one",
    )
    group.addoption(
        "--fuzz-confirm",
        default="yes",
        choices=("yes", "no"),
        help="re-run each reported failure's repro.py in a fresh interpreter and say whether it reproduced",
    )
    group.addoption(
        "--fuzz-gpus",
        default=None,
        help="GPU ids (as CUDA_VISIBLE_DEVICES takes them) to spread xdist workers over, worker i on GPU i mod count "
        "(default on CUDA: every visible GPU)",
    )
    group.addoption(
        "--fuzz-workers-per-gpu",
        type=int,
        default=DEFAULT_WORKERS_PER_GPU,
        help="workers per GPU that -n auto starts on CUDA, at most one per CPU core (default: %(default)s)",
    )
    group.addoption("--fuzz-progress", type=float, default=60.0, help="seconds between progress lines (0: none)")
    group.addoption(
        "--known-issues",
        default=None,
        choices=KNOWN_ISSUE_MODES,
        help="specs a known thunder issue matches: run and counted (xfail, the default; exclude is its old name), or "
        "counted and each registry entry re-tested (check); only specs of a slow entry are never run",
    )


# Said once per process at import, by every process, and true of every CPU machine: not worth a line each time.
_IMPORT_NOISE = (
    ("torch.utils.cpp_extension", "No CUDA runtime is found"),
    ("thunder.executors.transformer_engineex", "transformer_engine module not found"),
)
# Repeated by thunder and torch on many examples: counted once each in the campaign summary (`fuzz.campaign.hooks`).
_FILTERWARNINGS = ("ignore:torch.is_autocast_cpu_enabled:DeprecationWarning", "ignore::FutureWarning")


# tryfirst: xdist answers this firstresult hook too (with its core count), and its plugin registers after ours.
@pytest.hookimpl(optionalhook=True, tryfirst=True)  # an xdist hook; it runs before pytest_configure
def pytest_xdist_auto_num_workers(config: pytest.Config) -> int | None:
    """``-n auto`` on CUDA (or with ``--fuzz-gpus``): `fuzz.campaign.gpus.auto_worker_count`; on CPU xdist's own
    count."""
    from fuzz.campaign.gpus import auto_worker_count, checked_workers_per_gpu, visible_gpus

    if config.getoption("fuzz_gpus") is None and config.getoption("fuzz_device") == "cpu":
        return None
    try:
        per_gpu = checked_workers_per_gpu(config.getoption("fuzz_workers_per_gpu"))
        gpus = visible_gpus(config.getoption("fuzz_gpus"))
    except ValueError as error:
        raise pytest.UsageError(str(error)) from None
    return auto_worker_count(len(gpus), per_gpu, len(os.sched_getaffinity(0))) if gpus else None


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    if (gpu := getattr(config, "workerinput", {}).get("fuzz_gpu")) is not None:
        from fuzz.campaign.gpus import pin_to_gpu

        pin_to_gpu(gpu)  # first: the checks that follow import thunder, which may initialise CUDA
    _quiet(config)
    from fuzz.registry.triggers import EntryError

    try:
        from fuzz.campaign import hooks  # loads the known-issue registry
    except EntryError as error:
        raise pytest.UsageError(str(error)) from None
    config.pluginmanager.register(hooks, "ckpt-fuzz-hooks")


def _quiet(config: pytest.Config) -> None:
    """No import chatter; captured logs of a failure from WARNING up (thunder and dynamo log DEBUG records on every
    example), wherever pytest runs (``--pyargs fuzz`` from any directory has no ini file) unless the user chose."""
    for logger, message in _IMPORT_NOISE:
        logging.getLogger(logger).addFilter(lambda record, message=message: message not in record.getMessage())
        warnings.filterwarnings("ignore", message=message)
    logging_on = config.pluginmanager.has_plugin("logging")  # off with -p no:logging: no such option then
    if logging_on and config.getoption("log_level") is None and not config.getini("log_level"):
        config.option.log_level = "WARNING"
    for line in _FILTERWARNINGS:
        config.addinivalue_line("filterwarnings", line)
