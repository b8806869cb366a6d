"""What the user chose for a campaign, as the harness reads it from the command line."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from fuzz.campaign.choices import DEFAULT_SHARDS, DEVICE_CHOICES
from fuzz.generate.draws import MAX_DIM
from fuzz.judge.limits import DEFAULT_TIMEOUT_S


def resolve_device(requested: str) -> str:
    """``auto`` -> ``cuda`` when available else ``cpu``; raises ValueError for an unusable request."""
    import torch

    if requested not in DEVICE_CHOICES:
        raise ValueError(f"--fuzz-device {requested!r} is not one of {', '.join(DEVICE_CHOICES)}")
    if requested == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if requested == "cuda" and not torch.cuda.is_available():
        raise ValueError("--fuzz-device cuda: no CUDA device is available here; use --fuzz-device cpu or auto")
    return requested


@dataclass
class CampaignConfig:
    """What the user chose on the command line (device already resolved)."""

    device: str = "cpu"
    converter: str = "fixed"
    run_dir: Path = Path("fuzz-artifacts/run")  # this run's folder (`fuzz.report.run_folder`)
    run_id: str = "run"
    database: str = ""  # where the example database is (a directory or redis://...)
    command: str = ""  # the command line that started the run, as the summary records it
    minutes: float | None = None
    started_at: float | None = None  # when the command started (time.time()): --fuzz-minutes counts from there
    timeout_s: float | None = DEFAULT_TIMEOUT_S
    shards: int = DEFAULT_SHARDS
    profile: str = "dev"
    kinds: tuple[str, ...] | None = None
    dtypes: tuple[str, ...] | None = None
    grad_modes: tuple[str, ...] | None = None  # those a program's layers may run under (default: all)
    catalog_nodes: bool | None = None  # programs draw inputs as state, view ops, catalog updates (None: the profile's)
    structures: tuple[str, ...] = ()  # flow labels every drawn program shows (`fuzz.generate.program_traits`)
    ops: tuple[str, ...] | None = None  # the op family's ops (default: every drawable one)
    families: tuple[str, ...] | None = None  # the families it runs (`fuzz.campaign.families`; default: all)
    known_issues: str = "xfail"
    seed: int = 0  # generation seed of shard i is seed + i (recorded in the summary to re-run a night)
    executors: tuple[str, ...] = ()  # thunder's default executors, by name (empty: thunder's own defaults)
    gpus: tuple[str, ...] = ()  # the GPUs the controller spreads workers over (`fuzz.campaign.gpus`); empty: no pinning
    batch: int = 1  # the general family's networks judged this many at a time, one thunderfx compile each batch
    max_dim: int = MAX_DIM  # the general family's widest feature dim
    confirm: bool = True  # re-run each final failure's repro.py in a fresh interpreter before reporting it
