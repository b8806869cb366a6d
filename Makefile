# Fresh machine: `make campaign` (set up + a bounded CPU fuzz campaign) or `make test` (set up + self-tests).
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
MINUTES ?= 5
JOBS ?= 2
PYTEST_ARGS ?=
THUNDER ?= pinned

# On Linux x86_64, torch's CUDA libraries, triton and torch first, in batches of about 1 GB of wheels: pip keeps
# every wheel it downloaded until it is done, and the whole set in one go peaked at 11.3 GB of disk (measured).
TORCH_BATCHES := nvidia-cudnn-cu12,nvidia-cublas-cu12 \
	nvidia-nccl-cu12,nvidia-cusparse-cu12,nvidia-cusparselt-cu12,nvidia-cusolver-cu12 \
	nvidia-cufft-cu12,nvidia-nvshmem-cu12,nvidia-cuda-nvrtc-cu12,nvidia-curand-cu12,triton \
	nvidia-nvjitlink-cu12,nvidia-cuda-cupti-cu12,nvidia-cuda-runtime-cu12,nvidia-cufile-cu12,nvidia-nvtx-cu12 \
	torch

.PHONY: setup campaign nightly replay report known-issues test test-full pytest lint gpu-smoke benchmark
setup: $(VENV)/.installed
	@$(PY) -m fuzz.versions.thunder_versions use $(THUNDER)

$(VENV)/.installed: pyproject.toml constraints.txt
	@$(PYTHON) tools/check_setup_disk.py $(VENV)
	@command -v redis-server >/dev/null && command -v chromium >/dev/null || { \
		echo "installing redis-server and chromium with apt (the fleet tests start a Redis on loopback; the report test renders in Chromium)"; \
		SUDO=$$([ "$$(id -u)" = 0 ] || echo "sudo -n"); \
		$$SUDO apt-get install -y -q redis-server chromium >/dev/null 2>&1 || \
		{ $$SUDO apt-get update -q >/dev/null 2>&1 && $$SUDO apt-get install -y -q redis-server chromium >/dev/null 2>&1; } || \
		echo "could not install redis-server and chromium: tests/campaign/test_fleet.py and the report test will fail"; }
	@echo "creating $(VENV) with $(PYTHON) ($$($(PYTHON) --version 2>&1)) and the pinned set: about 7.4 GB, 5 minutes"
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --no-cache-dir --upgrade pip
	@if [ "$$(uname -sm)" = "Linux x86_64" ]; then for batch in $(TORCH_BATCHES); do \
		echo "pip install $$batch" | tr , ' '; \
		$(PY) -m pip install -q --no-cache-dir --no-deps -c constraints.txt $$(echo $$batch | tr , ' ') || exit 1; \
	done; fi
	$(PY) -m pip install --no-cache-dir -c constraints.txt -e '.[dev]'
	$(PY) -c "from fuzz.versions.compat import incompatibility as i; r = i(); assert r is None, r"
	touch $@

campaign: setup
	$(VENV)/bin/ckpt-fuzz run --minutes $(MINUTES) -n $(JOBS) --device cpu

# The nightly job: the registry re-checked on the newest thunder nightly, then a campaign on it (NIGHTLY_MINUTES,
# default 8 h), then what changed since the previous run (clusters new, gone, changed); exits non-zero when either
# failed, after both ran.
nightly: setup
	$(VENV)/bin/ckpt-fuzz known-issues --thunder nightly --device cpu; k=$$?; \
	$(VENV)/bin/ckpt-fuzz run --thunder nightly --minutes $(or $(NIGHTLY_MINUTES),480) -n $(JOBS); r=$$?; \
	$(VENV)/bin/ckpt-fuzz report --against previous || true; \
	exit $$(( k > r ? k : r ))

replay: setup
	$(VENV)/bin/ckpt-fuzz replay $(if $(RUN),--run $(RUN))

report: setup
	$(VENV)/bin/ckpt-fuzz report $(RUN)

known-issues: setup
	$(VENV)/bin/ckpt-fuzz known-issues --device cpu

# The self-tests by tier (tests/): unit/ the fast tests of each stage, campaign/ the campaign-level tests of the gate,
# fault_selftests/ the fault self-tests and matrices (all slow); a test that takes minutes anywhere is marked slow.
# CI's gate (under 20 minutes on 2 cores): unit/ and campaign/ but the slow tests, and a derandomized campaign of 2
# shards.
test: setup
	$(PY) -m ruff check .
	$(MAKE) --no-print-directory pytest TESTS='tests/unit tests/campaign' SELECT='-m "not slow" --fuzz-shards 2'

# Everything: every tier, the slow self-tests too (about 50 minutes on 2 cores), and the campaign's 8 shards.
test-full: setup
	$(PY) -m ruff check .
	$(MAKE) --no-print-directory pytest TESTS=tests SELECT=

TESTS ?= tests
pytest:
	$(PY) -m pytest $(TESTS) fuzz/ -n $(JOBS) --dist loadfile --hypothesis-profile ci --fuzz-device cpu -q -ra --durations=12 $(SELECT) $(PYTEST_ARGS); rc=$$?; \
		if [ $$rc -eq 5 ]; then echo "pytest collected no tests: failing"; exit 1; fi; exit $$rc

lint: setup
	$(PY) -m ruff check . && $(PY) -m ruff format --check .

# The first run on a CUDA machine (tools/gpu_smoke.py): installs this package against the machine's own torch, then
# the seed network with both converters, short general and model-zoo campaigns (--converter both) and the tolerance
# calibration on CUDA, all in GPU_SMOKE_OUT.
GPU_SMOKE_OUT ?= gpu-smoke
gpu-smoke:
	$(PYTHON) -m pip install -q -e .
	$(PYTHON) tools/gpu_smoke.py --out $(GPU_SMOKE_OUT)

benchmark: setup
	$(PY) -m tools.benchmark
