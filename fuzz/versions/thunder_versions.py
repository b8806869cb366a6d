"""Thunder versions from the package registry, each installed into its own small folder over the venv's torch.

A lightning-thunder wheel is a few MB of pure Python: ``pip install --no-deps --target FOLDER`` puts one
version beside the shared torch, and putting FOLDER first on ``PYTHONPATH`` makes a subprocess import it
(its dist-info comes first too, so ``importlib.metadata`` names it). Imports no torch.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from dataclasses import dataclass
from importlib.metadata import version as _distribution_version
from pathlib import Path

from packaging.version import InvalidVersion, Version

from fuzz.cache import cache_root

PACKAGE = "lightning-thunder"
PINNED = "0.2.6"  # the verified release (constraints.txt, fuzz.versions.compat.VERIFIED)
INDEX_MAX_AGE_S = 3600.0
_NIGHTLY_DATE = re.compile(r"\.dev(\d{4})(\d{2})(\d{2})")


class VersionError(ValueError):
    """A thunder version that is not on the registry, does not install, or does not run with the torch installed."""


@dataclass(frozen=True)
class ThunderVersion:
    """One thunder version installed in its own ``folder`` (None: the venv's own thunder)."""

    version: str
    folder: Path | None

    def environment(self, base: dict[str, str] | None = None) -> dict[str, str]:
        """``base`` (default: this process's environment) with ``folder`` first on ``PYTHONPATH``."""
        env = dict(os.environ if base is None else base)
        if self.folder is not None:
            env["PYTHONPATH"] = os.pathsep.join(p for p in (str(self.folder), env.get("PYTHONPATH", "")) if p)
        return env


def installed() -> str:
    """The lightning-thunder version this interpreter imports (read afresh: pip may just have changed it)."""
    return _distribution_version(PACKAGE)


def _folder_root() -> Path:
    return cache_root() / "thunder"


def _order(versions: list[str]) -> list[str]:
    valid = []
    for v in versions:
        try:
            valid.append((Version(v), v))
        except InvalidVersion:
            continue
    return [v for _, v in sorted(valid)]


def available(refresh: bool = False) -> list[str]:
    """Every lightning-thunder version on the registry, oldest first (``pip index``, cached for an hour)."""
    index = _folder_root() / "index.json"
    if not refresh and index.exists() and time.time() - index.stat().st_mtime < INDEX_MAX_AGE_S:
        return json.loads(index.read_text())
    listed = _run([sys.executable, "-m", "pip", "index", "versions", "--pre", PACKAGE], 300, "pip index")
    match = re.search(r"Available versions:\s*(.+)", listed.stdout)
    if listed.returncode or not match:
        raise VersionError(f"could not list {PACKAGE} versions with pip index: {_last_line(listed)}")
    versions = _order([v.strip() for v in match.group(1).split(",")])
    index.parent.mkdir(parents=True, exist_ok=True)
    index.write_text(json.dumps(versions))
    return versions


def is_nightly(version: str) -> bool:
    """Whether ``version`` is a nightly build (a dev release carrying its date)."""
    return bool(_NIGHTLY_DATE.search(version))


def nearest(version: str, versions: list[str], count: int = 3) -> list[str]:
    """The ``count`` versions of ``versions`` closest to ``version`` in release order (it need not exist)."""
    try:
        wanted = Version(version)
    except InvalidVersion:
        return versions[-count:]
    later = [i for i, v in enumerate(versions) if Version(v) >= wanted]
    at = later[0] if later else len(versions)
    start = max(0, min(at - count // 2 - count % 2 + 1, len(versions) - count))
    return versions[start : start + count]


def resolve(request: str, versions: list[str]) -> str:
    """The exact version meant by ``request``: "release" (the newest release), "nightly" (the newest nightly),
    "pinned", or a version on the registry; else `VersionError` naming the nearest available ones."""
    releases = [v for v in versions if not Version(v).is_prerelease]
    nightlies = [v for v in versions if is_nightly(v)]
    named = {"pinned": [PINNED], "release": releases[-1:], "nightly": nightlies[-1:]}
    if request in named:
        if not named[request]:
            raise VersionError(f"no {request} version of {PACKAGE} on the registry")
        return named[request][0]
    if request in versions:
        return request
    near = ", ".join(nearest(request, versions))
    raise VersionError(f"{PACKAGE} {request!r} is not on the registry; nearest available: {near}")


def build_date(version: str) -> str:
    """The day ``version`` was built (YYYY-MM-DD): a nightly's from its name, else the newest file in its wheel
    (recorded at set-up); "" when unknown."""
    if match := _NIGHTLY_DATE.search(version):
        return "-".join(match.groups())
    recorded = _folder_root() / version / ".date"
    return recorded.read_text().strip() if recorded.exists() else ""


def _wheel_date(wheel: Path) -> str:
    with zipfile.ZipFile(wheel) as archive:
        year, month, day, *_ = max(info.date_time for info in archive.infolist())
    return f"{year:04d}-{month:02d}-{day:02d}"


def _run(command: list[str], timeout_s: float, what: str, **kwargs) -> subprocess.CompletedProcess:
    """``command``'s completed process (output captured as text); `VersionError` naming ``what`` on a time-out."""
    try:
        return subprocess.run(command, capture_output=True, text=True, timeout=timeout_s, check=False, **kwargs)
    except subprocess.TimeoutExpired:
        raise VersionError(f"{what} took more than {timeout_s:.0f} s") from None


def _last_line(completed: subprocess.CompletedProcess) -> str:
    lines = (completed.stderr or completed.stdout or "").strip().splitlines()
    return lines[-1] if lines else f"exit status {completed.returncode}"


def install(version: str) -> ThunderVersion:
    """``version`` installed into its own folder under the cache (kept there: later calls take seconds less);
    `VersionError` when pip cannot fetch or install it."""
    folder = _folder_root() / version
    if (folder / ".ready").exists():
        return ThunderVersion(version, folder)
    folder.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=folder.parent, prefix=f".{version}.") as tmp:
        wheels, target = Path(tmp) / "wheels", Path(tmp) / "target"
        pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
        fetched = _run(
            [*pip, "download", "--no-deps", "--only-binary=:all:", "-d", str(wheels), f"{PACKAGE}=={version}"],
            600, f"downloading {PACKAGE}=={version}",
        )  # fmt: skip
        found = sorted(wheels.glob("*.whl")) if wheels.exists() else []
        if fetched.returncode or not found:
            raise VersionError(f"could not download {PACKAGE}=={version}: {_last_line(fetched)}")
        installed = _run(
            [*pip, "install", "--no-deps", "--no-compile", "--target", str(target), str(found[0])],
            600, f"installing {PACKAGE}=={version}",
        )  # fmt: skip
        if installed.returncode:
            raise VersionError(f"could not install {PACKAGE}=={version}: {_last_line(installed)}")
        (target / ".date").write_text(_wheel_date(found[0]))
        (target / ".ready").touch()
        if not (folder / ".ready").exists():  # else another process installed it meanwhile: keep theirs
            shutil.rmtree(folder, ignore_errors=True)  # a half-installed folder from an interrupted set-up
            try:
                os.replace(target, folder)
            except OSError:
                if not (folder / ".ready").exists():
                    raise
    return ThunderVersion(version, folder)


# Run in a subprocess with the version's folder first on the path: the thunder that imports, its torch, and
# thunderfx on a checkpointed Linear -> tanh against eager (the smallest thing the harness does).
_PROBE = """
import json, torch, thunder
from importlib.metadata import version
from thunder.dynamo import thunderfx
from torch.utils.checkpoint import checkpoint
found = {"thunder": version("lightning-thunder"), "torch": torch.__version__, "thunder_file": thunder.__file__}
print(json.dumps(found), flush=True)
torch.manual_seed(0)
net = torch.nn.Linear(4, 4)
fn = lambda x: checkpoint(lambda y: torch.tanh(net(y)), x, use_reentrant=False)
x = torch.randn(2, 4, requires_grad=True)
fn(x).sum().backward()
want = (x.grad.clone(), net.weight.grad.clone())
x.grad = net.weight.grad = None
thunderfx(fn)(x).sum().backward()
assert torch.allclose(x.grad, want[0], atol=1e-6), "input grads differ"
assert torch.allclose(net.weight.grad, want[1], atol=1e-6), "weight grads differ"
print("OK")
"""


def probe(thunder: ThunderVersion, timeout_s: float = 600.0) -> dict[str, str]:
    """The versions ``thunder``'s environment imports ({"thunder", "torch", "thunder_file"}), after checking that
    it is the version asked for and that thunderfx runs a checkpointed network there; else `VersionError`."""
    ran = _run(
        [sys.executable, "-c", _PROBE], timeout_s, f"probing {PACKAGE} {thunder.version}", env=thunder.environment()
    )
    lines = ran.stdout.splitlines()
    found = json.loads(lines[0]) if lines and lines[0].startswith("{") else None
    if found is None:
        raise VersionError(f"{PACKAGE} {thunder.version} does not import here: {_last_line(ran)}")
    if found["thunder"] != thunder.version:
        raise VersionError(f"asked for {PACKAGE} {thunder.version}, but {found['thunder']} imports")
    if ran.returncode or lines[-1] != "OK":
        raise VersionError(
            f"{PACKAGE} {thunder.version} imports with torch {found['torch']} but does not run thunderfx on a "
            f"checkpointed Linear -> tanh: {_last_line(ran)}"
        )
    return found


def _exact(request: str) -> str:
    """`resolve` ``request``, without asking the registry for the pinned version or one already installed here."""
    if request == "pinned":
        return PINNED
    if request == installed() or (_folder_root() / request / ".ready").exists():
        return request
    return resolve(request, available())


def located(version: str) -> ThunderVersion:
    """Thunder ``version``: the venv's own when it holds that version, else installed into the cache."""
    return ThunderVersion(version, None) if version == installed() else install(version)


def prepare(request: str) -> ThunderVersion:
    """The thunder meant by ``request`` ("pinned", "release", "nightly" or a version), installed and probed (the
    venv's own thunder unprobed); `VersionError` naming what is wrong when it cannot be."""
    thunder = located(_exact(request))
    if thunder.folder is not None:
        probe(thunder)
    return thunder


def use_in_venv(request: str) -> str:
    """Make the thunder ``request`` names the one this interpreter's environment holds (``pip install --no-deps``
    over it, then `probe`); returns a line saying which. `VersionError` when it cannot."""
    own = installed()
    exact = _exact(request)
    if exact != own:
        pip = _run(
            [sys.executable, "-m", "pip", "install", "-q", "--no-deps", f"{PACKAGE}=={exact}"],
            600, f"installing {PACKAGE}=={exact}",
        )  # fmt: skip
        if pip.returncode:
            raise VersionError(f"could not install {PACKAGE}=={exact}: {_last_line(pip)}")
    found = probe(ThunderVersion(exact, None)) if exact != own else {"thunder": own}
    torch = f" with torch {found['torch']}" if "torch" in found else ""
    return f"lightning-thunder {exact}{torch} ({'switched from ' + own if exact != own else 'already installed'})"


def main(argv: list[str]) -> int:
    """``python -m fuzz.versions.thunder_versions use REQUEST`` (`use_in_venv`; the Makefile's ``THUNDER=``)."""
    if len(argv) != 2 or argv[0] != "use":
        print("usage: python -m fuzz.versions.thunder_versions use VERSION|nightly|release|pinned", file=sys.stderr)
        return 2
    try:
        print(use_in_venv(argv[1]))
    except VersionError as error:
        print(f"THUNDER={argv[1]}: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
