"""Where the harness keeps what it can rebuild: the op catalog, thunder versions and the registry's index."""

import os
from pathlib import Path

CACHE_ENVIRONMENT_VARIABLE = "FUZZ_CACHE_DIR"


def write_atomically(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file and a rename: readers never see half a file, and
    processes writing the same file at once leave one whole (the last rename wins)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def cache_root() -> Path:
    """``$FUZZ_CACHE_DIR``, else ``~/.cache/ckpt-parity-fuzz``."""
    return Path(os.environ.get(CACHE_ENVIRONMENT_VARIABLE) or Path.home() / ".cache" / "ckpt-parity-fuzz")
