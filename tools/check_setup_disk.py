"""Before ``make setup`` runs pip: is there disk for what it writes? One line and exit 1 when not.

    python3 tools/check_setup_disk.py VENV_DIR

Measured from a fresh clone (2026-12-01): the venv ends at 7.4 GB; the Makefile installs torch's CUDA libraries,
triton and torch in batches of about 1 GB of wheels first, because pip keeps every wheel it downloaded until it is
done (all at once: 11.3 GB at the peak; in batches: 7.6 GB). Standard library only: it runs before the venv exists.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path

GB = 1024**3  # binary gigabytes (GiB), as df -h counts
VENV_BYTES = 8 * GB  # 7.4 GB measured, rounded up
DOWNLOAD_BYTES = GB * 3 // 2  # pip's temporary copies of one batch of wheels (cuDNN's and cuBLAS's: 1.3 GB)


def same_disk(first: Path, second: Path) -> bool:
    return os.stat(first).st_dev == os.stat(second).st_dev


def shortfall(venv_dir: Path, temp_dir: Path) -> str | None:
    """Why the set-up would run out of disk, or None when there is room for what pip writes: the venv (unless a
    set-up finished it before, ``.installed``: then pip only updates it) and its downloads in ``temp_dir``."""
    venv_disk = next(folder for folder in (venv_dir, *venv_dir.parents) if folder.exists())
    venv_bytes = 0 if (venv_dir / ".installed").exists() else VENV_BYTES
    if same_disk(venv_disk, temp_dir):
        what = "the venv and pip's downloads" if venv_bytes else "pip's downloads"
        needs = [(venv_disk, venv_bytes + DOWNLOAD_BYTES, what)]
    else:
        needs = [(venv_disk, venv_bytes, "the venv"), (temp_dir, DOWNLOAD_BYTES, "pip's downloads")]
    for folder, wanted, what in needs:
        free = shutil.disk_usage(folder).free
        if free < wanted:
            return (
                f"make setup needs about {wanted / GB:.1f} GB free on {folder} for {what}, and {free / GB:.1f} GB"
                " are: free some space there (or set TMPDIR to a folder on a larger disk) and run it again"
            )
    return None


if __name__ == "__main__":
    problem = shortfall(Path(sys.argv[1]).resolve(), Path(tempfile.gettempdir()).resolve())
    if problem:
        print(problem, file=sys.stderr)
        sys.exit(1)
