"""Put this folder and the repository root on PYTHONPATH to inject $FUZZ_INJECT_FAULT into thunder in *every*
Python process started with that environment (a fault in thunder itself, as a fresh interpreter running a
repro.py sees it); `-p tests.faults` alone injects it into the pytest processes only (process state)."""

import os

if os.environ.get("FUZZ_INJECT_FAULT"):
    import tests.faults

    tests.faults.install_from_environment()
