"""The campaign's configuration from pytest's options (`fuzz.campaign.plugin` declares them): each checked, a bad
value a one-line `pytest.UsageError` naming the option; the controller's choices (seed, run id, device, start)
taken by each xdist worker from it; the Hypothesis profile loaded and thunder's executors set on the way."""

from __future__ import annotations

import difflib
import random
from pathlib import Path

import pytest
from hypothesis import settings

from fuzz.campaign.config import CampaignConfig, resolve_device
from fuzz.campaign.database import DatabaseError, default_location, open_database
from fuzz.campaign.families import BY_NAME
from fuzz.campaign.gpus import checked_workers_per_gpu, visible_gpus
from fuzz.campaign.profiles import PROFILES, register_profiles
from fuzz.generate.draws import OP_KINDS
from fuzz.generate.layers import LAYER_KINDS
from fuzz.generate.op_catalog import catalog
from fuzz.generate.program_traits import flow_labels
from fuzz.generate.spec import DTYPES
from fuzz.generate.spec_parts import GRAD_MODES
from fuzz.judge.batch import MAX_BATCH
from fuzz.report.run_folder import check_run_id, new_run_id
from fuzz.report.summary import command_line, started_at
from fuzz.run.runner import executor_names, use_executors


def worker_id(config: pytest.Config) -> str | None:
    """The xdist worker's id (None: the controller, or a run without xdist)."""
    workerinput = getattr(config, "workerinput", None)
    return None if workerinput is None else workerinput["workerid"]


def campaign_config(config: pytest.Config) -> CampaignConfig:
    """What the options say, checked; loads their Hypothesis profile and sets thunder's executors."""
    _check_numbers(config)
    device = _device(config)
    location = config.getoption("fuzz_database") or default_location()
    profile = _load_profile(config, location)
    try:
        executors = executor_names(config.getoption("fuzz_executors"), device)
    except ValueError as error:
        raise pytest.UsageError(str(error)) from None
    use_executors(executors)
    kinds = _choice_list(config, "fuzz_layers", [name for name, kind in LAYER_KINDS.items() if kind.drawn])
    if worker_id(config) is None and any(kind in (kinds or OP_KINDS) for kind in OP_KINDS):
        catalog()  # built (or read) once here, before xdist starts workers that would all build it at once
    dtypes = _choice_list(config, "fuzz_dtypes", DTYPES)
    grad_modes = _choice_list(config, "fuzz_grad_modes", (*GRAD_MODES, "none"))
    grad_modes = grad_modes and tuple(mode for mode in grad_modes if mode != "none")
    ops = _choice_list(config, "fuzz_ops", catalog().ops) if config.getoption("fuzz_ops") else None
    families = _choice_list(config, "fuzz_families", BY_NAME)
    if families and not any(BY_NAME[name].runs_in(profile, config.getoption("fuzz_minutes")) for name in families):
        rules = "; ".join(f"{name}: profiles {', '.join(BY_NAME[name].profiles)}" + (
            f", --fuzz-minutes {BY_NAME[name].min_minutes:g} or more" if BY_NAME[name].min_minutes else ""
        ) for name in families)  # fmt: skip
        raise pytest.UsageError(f"--fuzz-families {','.join(families)}: none runs under profile {profile} ({rules})")
    gpus = _gpus(config, device)
    run_id = _run_id(config, profile)  # (last: a run id given is claimed, its folder made)
    return CampaignConfig(
        seed=_campaign_seed(config, profile),
        executors=executors,
        device=device,
        converter=config.getoption("converter"),
        run_dir=Path(config.getoption("fuzz_artifacts")) / run_id,
        run_id=run_id,
        database=location if "://" in location else str(Path(location).resolve()),
        command=command_line(config.invocation_params.args) if worker_id(config) is None else "",
        minutes=config.getoption("fuzz_minutes"),
        started_at=getattr(config, "workerinput", {}).get("fuzz_started_at") or started_at(),
        timeout_s=config.getoption("fuzz_timeout"),
        shards=config.getoption("fuzz_shards"),
        profile=profile,
        kinds=kinds,
        dtypes=dtypes,
        grad_modes=grad_modes,
        catalog_nodes=None if (nodes := config.getoption("fuzz_catalog_nodes")) is None else nodes == "yes",
        structures=_checked_structures(config, families),
        ops=ops,
        families=families,
        known_issues="check" if config.getoption("known_issues") == "check" else "xfail",
        confirm=config.getoption("fuzz_confirm") == "yes",
        batch=config.getoption("fuzz_batch"),
        max_dim=config.getoption("fuzz_max_dim"),
        gpus=gpus,
    )


def _checked_structures(config: pytest.Config, families: tuple[str, ...] | None) -> tuple[str, ...]:
    """The flow labels ``--fuzz-structure`` asks every drawn program to show, each checked."""
    structures = tuple(dict.fromkeys(config.getoption("fuzz_structure") or ()))
    if unknown := [label for label in structures if label not in flow_labels()]:
        near = difflib.get_close_matches(unknown[0], flow_labels(), n=3, cutoff=0)  # (cutoff 0: always three)
        raise pytest.UsageError(
            f"--fuzz-structure {unknown[0]!r}: not a program's flow label (the summary's coverage lists them); "
            f"nearest: {', '.join(map(repr, near))}"
        )
    if structures and families != ("program",):
        raise pytest.UsageError(
            f"--fuzz-structure {structures[0]!r}: only programs show flow labels; add --fuzz-families program"
        )
    return structures


def _check_numbers(config: pytest.Config) -> None:
    for name in ("fuzz_minutes", "fuzz_timeout"):
        value = config.getoption(name)
        if value is not None and value <= 0:
            raise pytest.UsageError(f"--{name.replace('_', '-')} must be positive, got {value}")
    for name, most in (("fuzz_shards", ""), ("fuzz_batch", MAX_BATCH), ("fuzz_max_dim", "")):
        if not 1 <= (value := config.getoption(name)) <= (most or value):
            bounds = f"at least 1{most and f' and at most {most}'}"
            raise pytest.UsageError(f"--{name.replace('_', '-')} must be {bounds}, got {value}")


def _device(config: pytest.Config) -> str:
    try:
        # A worker takes the controller's device: pinned to a GPU that is not there, "auto" would quietly become cpu.
        return getattr(config, "workerinput", {}).get("fuzz_device") or resolve_device(config.getoption("fuzz_device"))
    except ValueError as error:
        raise pytest.UsageError(str(error)) from None


def _load_profile(config: pytest.Config, location: str) -> str:
    """Register the profiles on the database at ``location`` and load the chosen one; returns its name."""
    try:
        database = open_database(location)
    except DatabaseError as error:
        raise pytest.UsageError(f"--fuzz-database: {error}") from None
    register_profiles(database)
    profile = config.getoption("hypothesis_profile", None) or "dev"
    if profile not in PROFILES:
        raise pytest.UsageError(f"--hypothesis-profile {profile!r} is not one of {', '.join(PROFILES)}")
    settings.load_profile(profile)
    return profile


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


def _gpus(config: pytest.Config, device: str) -> tuple[str, ...]:
    """The GPUs the controller spreads xdist workers over (`fuzz.campaign.gpus`): ``--fuzz-gpus``, else every visible
    GPU on CUDA; none for a worker, a run without xdist, or a CPU run without ``--fuzz-gpus``."""
    if worker_id(config) is not None or not config.getoption("numprocesses", None):
        return ()
    try:
        checked_workers_per_gpu(config.getoption("fuzz_workers_per_gpu"))
        requested = config.getoption("fuzz_gpus")
        return visible_gpus(requested) if requested is not None or device == "cuda" else ()
    except ValueError as error:
        raise pytest.UsageError(str(error)) from None


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
