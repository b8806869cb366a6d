"""Which GPU each xdist worker runs on, and how many workers ``-n auto`` starts on a CUDA box.

The controller decides (it alone knows how many workers there are and which GPUs are visible) and
hands each worker its GPU id through xdist's ``workerinput``; the worker puts it in
``CUDA_VISIBLE_DEVICES`` before anything initialises CUDA, so its "cuda" is that one GPU. A
worker that replaces a dead one takes the next id, still modulo the GPU count.

Nothing here imports torch except `visible_gpus` (counting devices needs it).
"""

from __future__ import annotations

import os
from collections.abc import Sequence

# Workers per GPU under `-n auto`. A tiny network's thunderfx compile is seconds of Python on one
# core against milliseconds on the GPU, so the CPU cores, not the GPU, bound a box: two workers keep
# a GPU busy while each compiles, and the core count caps the total. Not yet measured on a GPU.
DEFAULT_WORKERS_PER_GPU = 2
VISIBLE_DEVICES = "CUDA_VISIBLE_DEVICES"


def parse_gpu_list(text: str) -> tuple[str, ...]:
    """``"0,1,3"`` -> ``("0", "1", "3")``; raises ValueError naming what is wrong (empty, repeated ids)."""
    gpus = tuple(part.strip() for part in text.split(",") if part.strip())
    if not gpus:
        raise ValueError(f"--fuzz-gpus {text!r}: no GPU id; give a comma-separated list such as 0,1")
    if len(set(gpus)) != len(gpus):
        raise ValueError(f"--fuzz-gpus {text!r}: a GPU id is repeated; list each GPU once")
    return gpus


def visible_gpus(requested: str | None) -> tuple[str, ...]:
    """The GPUs a campaign spreads its workers over: ``requested`` (``--fuzz-gpus``), else those CUDA sees here.

    Ids are what ``CUDA_VISIBLE_DEVICES`` takes. Where the run inherited a ``CUDA_VISIBLE_DEVICES`` (a Slurm or
    Kubernetes allocation), ``--fuzz-gpus`` counts from 0 within it and maps to its entries; otherwise its values are
    taken as given. Without ``--fuzz-gpus``: the inherited entries, else ``0 .. count-1``; empty without CUDA.
    """
    inherited = [part.strip() for part in os.environ.get(VISIBLE_DEVICES, "").split(",") if part.strip()]
    if requested is not None:
        chosen = parse_gpu_list(requested)
        if not inherited:
            return chosen
        outside = [gpu for gpu in chosen if not (gpu.isdigit() and int(gpu) < len(inherited))]
        if outside:
            raise ValueError(
                f"--fuzz-gpus {requested!r}: {', '.join(outside)} not among the {len(inherited)} GPUs this run was "
                f"given ({VISIBLE_DEVICES}={','.join(inherited)}); count them from 0"
            )
        return tuple(inherited[int(gpu)] for gpu in chosen)
    import torch

    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    return tuple(inherited[:count]) if len(inherited) >= count > 0 else tuple(str(i) for i in range(count))


def checked_workers_per_gpu(count: int) -> int:
    """``count`` (``--fuzz-workers-per-gpu``), or ValueError when it is below 1."""
    if count < 1:
        raise ValueError(f"--fuzz-workers-per-gpu must be at least 1, got {count}")
    return count


def worker_index(worker_id: str) -> int:
    """xdist's ``"gw3"`` -> 3."""
    return int(worker_id.removeprefix("gw"))


def gpu_of_worker(worker_id: str, gpus: Sequence[str]) -> str:
    """The GPU of xdist worker ``worker_id``: worker i runs on ``gpus[i mod len(gpus)]``."""
    return gpus[worker_index(worker_id) % len(gpus)]


def auto_worker_count(gpus: int, workers_per_gpu: int, cores: int) -> int:
    """Workers for ``-n auto`` on a box with ``gpus`` GPUs: ``workers_per_gpu`` each, at most one per CPU core."""
    return max(1, min(gpus * workers_per_gpu, cores))


def pin_to_gpu(gpu: str) -> None:
    """Make ``gpu`` the only GPU this process sees; must run before anything initialises CUDA."""
    import sys

    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_initialized():
        raise RuntimeError(f"CUDA was initialised before this worker was pinned to GPU {gpu}: pin it earlier")
    os.environ[VISIBLE_DEVICES] = gpu
