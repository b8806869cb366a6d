"""Where the harness keeps what it can rebuild: the op catalog, thunder versions and the registry's index."""

import os
from pathlib import Path

CACHE_ENVIRONMENT_VARIABLE = "FUZZ_CACHE_DIR"


def cache_root() -> Path:
    """``$FUZZ_CACHE_DIR``, else ``~/.cache/ckpt-parity-fuzz``."""
    return Path(os.environ.get(CACHE_ENVIRONMENT_VARIABLE) or Path.home() / ".cache" / "ckpt-parity-fuzz")
