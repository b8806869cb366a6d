"""The harness's pytest plugin is `fuzz.plugin`, registered by the package's ``pytest11`` entry point.

A checkout used without installing the package (only on ``PYTHONPATH``) has no entry point: load it from here.
"""

from importlib.metadata import entry_points

if not any(plugin.value == "fuzz.plugin" for plugin in entry_points(group="pytest11")):
    pytest_plugins = ["fuzz.plugin"]
