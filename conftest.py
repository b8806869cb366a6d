"""The harness's pytest plugin is `fuzz.campaign.plugin`, registered by the package's ``pytest11`` entry point.

A checkout used without installing the package (only on ``PYTHONPATH``), or with entry points off
(``PYTEST_DISABLE_PLUGIN_AUTOLOAD``), has no plugin loaded: load it from here.
"""

import os
from importlib.metadata import entry_points

if os.environ.get("PYTEST_DISABLE_PLUGIN_AUTOLOAD") or not any(
    plugin.value == "fuzz.campaign.plugin" for plugin in entry_points(group="pytest11")
):
    pytest_plugins = ["fuzz.campaign.plugin"]
