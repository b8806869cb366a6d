"""A page rendered by a real browser: Debian's Chromium, headless (``make setup`` installs it)."""

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

_FLAGS = [
    "--headless",
    "--no-sandbox",  # CI runs as root
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    # This machine's network is closed: without these, Chromium keeps opening connections that are refused.
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def chromium() -> str:
    """The browser's path; skips the test where there is none, except under CI, where it fails."""
    if path := shutil.which("chromium") or shutil.which("chromium-browser"):
        return path
    if os.environ.get("CI"):
        pytest.fail("chromium is not installed: `make setup` installs it (apt package chromium)")
    pytest.skip("chromium is not installed (apt package chromium; `make setup` installs it)")


def render(page: Path, screenshot: Path, size: tuple[int, int] = (1400, 2400)) -> str:
    """Render ``page`` from disk: write its screenshot to ``screenshot``, return the DOM after scripts ran."""
    with tempfile.TemporaryDirectory() as profile:
        flags = [chromium(), *_FLAGS, f"--user-data-dir={profile}", f"--window-size={size[0]},{size[1]}"]
        url = page.resolve().as_uri()
        subprocess.run([*flags, f"--screenshot={screenshot}", url], check=True, capture_output=True, timeout=120)
        dom = subprocess.run([*flags, "--dump-dom", url], check=True, capture_output=True, text=True, timeout=120)
        return dom.stdout
