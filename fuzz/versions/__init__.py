"""Which thunder the harness runs against: the installed torch/thunder pair checked, thunder versions
installed side by side and switched, a bisection between two of them.
Takes version strings; gives installs, a compatibility verdict and the first bad version."""
