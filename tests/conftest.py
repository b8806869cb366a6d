"""Every module of the harness imported before any test runs.

Hypothesis draws, now and then, constants found in the source of the local modules imported so far
(``hypothesis.internal.conjecture.providers._get_local_constants``): without this, a derandomized test's examples,
and where its shrink stops, would depend on which tests ran before it in its xdist worker.
"""

import importlib
import pkgutil

import fuzz

for _module in pkgutil.walk_packages(fuzz.__path__, "fuzz."):
    if not _module.name.rsplit(".", 1)[-1].startswith("test_"):  # (pytest imports the campaign's test module)
        importlib.import_module(_module.name)
