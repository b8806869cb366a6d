# Fresh machine: `make campaign` (set up + a bounded CPU fuzz campaign) or `make test` (set up + self-tests).
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
MINUTES ?= 5
JOBS ?= 2

.PHONY: setup campaign test lint benchmark
setup: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml constraints.txt
	@command -v redis-server >/dev/null || { echo "installing redis-server (the fleet tests start one on loopback)"; \
		SUDO=$$([ "$$(id -u)" = 0 ] || echo "sudo -n"); \
		$$SUDO apt-get install -y -q redis-server >/dev/null 2>&1 || \
		{ $$SUDO apt-get update -q >/dev/null 2>&1 && $$SUDO apt-get install -y -q redis-server >/dev/null 2>&1; } || \
		echo "could not install redis-server: install it to run tests/test_fleet.py"; }
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -c constraints.txt -e '.[dev]'
	$(PY) -c "from fuzz.compat import incompatibility as i; r = i(); assert r is None, r"
	touch $@

campaign: setup
	$(PY) -m pytest fuzz/ -n $(JOBS) --hypothesis-profile nightly --fuzz-minutes $(MINUTES) --fuzz-device cpu \
		-q

test: setup
	$(PY) -m ruff check .
	$(PY) -m pytest tests/ fuzz/ -n $(JOBS) --dist loadfile --hypothesis-profile ci --fuzz-device cpu -q -ra; rc=$$?; \
		if [ $$rc -eq 5 ]; then echo "pytest collected no tests: failing"; exit 1; fi; exit $$rc

lint: setup
	$(PY) -m ruff check . && $(PY) -m ruff format --check .

benchmark: setup
	$(PY) -m tools.benchmark
