"""The set-up's disk check: a one-line reason before pip runs out of space half-way (as a CI machine once did)."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tools import check_setup_disk

ROOT = Path(__file__).resolve().parents[2]


def _needing(monkeypatch, venv_bytes: int, download_bytes: int) -> None:
    monkeypatch.setattr(check_setup_disk, "VENV_BYTES", venv_bytes)
    monkeypatch.setattr(check_setup_disk, "DOWNLOAD_BYTES", download_bytes)


def test_a_disk_with_room_passes_and_one_without_names_the_folder_and_the_gigabytes(tmp_path, monkeypatch):
    venv = tmp_path / "not-yet" / ".venv"
    free = shutil.disk_usage(tmp_path).free
    _needing(monkeypatch, free // 4, free // 4)
    assert check_setup_disk.shortfall(venv, tmp_path) is None
    _needing(monkeypatch, free, free // 4)
    problem = check_setup_disk.shortfall(venv, tmp_path)
    assert problem is not None and "\n" not in problem
    assert f"on {tmp_path} for the venv and pip's downloads" in problem  # the nearest folder that exists
    assert "run it again" in problem
    venv.mkdir(parents=True)  # half-built (a set-up that stopped): it may still need all of it
    assert "for the venv and pip's downloads" in check_setup_disk.shortfall(venv, tmp_path)
    (venv / ".installed").touch()  # a finished venv is only updated: the downloads need room, not a second venv
    assert check_setup_disk.shortfall(venv, tmp_path) is None


def test_on_two_disks_each_needs_room_for_its_own_part(tmp_path, monkeypatch):
    venv, temp = tmp_path / ".venv", tmp_path / "tmp"
    temp.mkdir()
    monkeypatch.setattr(check_setup_disk, "same_disk", lambda first, second: False)
    free = shutil.disk_usage(tmp_path).free
    _needing(monkeypatch, free // 2, free // 2)
    assert check_setup_disk.shortfall(venv, temp) is None  # together they would not fit: apart they do
    _needing(monkeypatch, free // 2, free * 2)
    assert f"on {temp} for pip's downloads" in check_setup_disk.shortfall(venv, temp)
    _needing(monkeypatch, free * 2, free // 2)
    assert f"on {tmp_path} for the venv," in check_setup_disk.shortfall(venv, temp)


def test_the_script_is_silent_and_exits_0_when_there_is_room(tmp_path):
    if check_setup_disk.shortfall(tmp_path / ".venv", Path(tempfile.gettempdir()).resolve()):
        pytest.skip("this machine has less free disk than a second venv would need")
    ran = subprocess.run(
        [sys.executable, "tools/check_setup_disk.py", str(tmp_path / ".venv")],
        cwd=ROOT, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert (ran.returncode, ran.stdout, ran.stderr) == (0, "", "")
