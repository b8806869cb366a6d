"""The set-up's disk check: a one-line reason before pip runs out of space half-way (as a CI machine once did)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tools import check_setup_disk

ROOT = Path(__file__).resolve().parents[1]


def test_a_disk_with_room_passes_and_one_without_names_the_folder_and_the_gigabytes(tmp_path, monkeypatch):
    venv = tmp_path / "not-yet" / ".venv"
    free = shutil.disk_usage(tmp_path).free
    monkeypatch.setattr(check_setup_disk, "VENV_BYTES", free // 4)
    monkeypatch.setattr(check_setup_disk, "DOWNLOAD_BYTES", free // 4)
    assert check_setup_disk.shortfall(venv, tmp_path) is None
    monkeypatch.setattr(check_setup_disk, "VENV_BYTES", free)
    problem = check_setup_disk.shortfall(venv, tmp_path)
    assert problem is not None and "\n" not in problem
    assert f"on {tmp_path} for the venv and pip's downloads" in problem  # the nearest folder that exists
    assert "run it again" in problem


def test_the_script_is_silent_and_exits_0_when_there_is_room(tmp_path):
    if check_setup_disk.shortfall(tmp_path, tmp_path):
        pytest.skip("this machine has less free disk than a second venv would need")
    ran = subprocess.run(
        [sys.executable, "tools/check_setup_disk.py", str(tmp_path / ".venv")],
        cwd=ROOT, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert (ran.returncode, ran.stdout, ran.stderr) == (0, "", "")
