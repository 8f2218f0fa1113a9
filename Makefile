# raftlog developer commands. Everything runs inside ./.venv, created on demand.
#
#   make run    the local three-peer cluster; installs only what the peers and CLIs need
#   make test   the whole test suite; installs the spark and dev extras and the reference
#   make lint   ruff + mypy --strict
#
# Two stamp files record what the venv holds, so `make run` never pulls in Spark or the dev
# tools, `make test` adds them once, and switching back and forth reinstalls nothing until
# pyproject.toml changes.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
# setuptools announces its meta-path finder for editable installs with an "Editable
# installation" warning (raftlog has two package roots: . and integrations/spark); that is
# the intended mode, so the message is filtered and pip's output stays clean.
PIP    := PYTHONWARNINGS="ignore:Editable installation" $(BIN)/python -m pip --quiet \
          --disable-pip-version-check
RUN_STAMP  := $(VENV)/.installed-run
TEST_STAMP := $(VENV)/.installed-test
PYTEST_ARGS ?= --durations=25
# Two pytest-xdist workers (tests/conftest.py groups the tests by file, all of tests/spark in
# one group); `make test PYTEST_WORKERS=0` runs the suite in one process.
PYTEST_WORKERS ?= 2

.PHONY: install install-run test lint interop run run-secure bench browser fuse kcat compiler

# Byte-compile the source tree (compileall skips what is up to date: ~0.2 s). The editable
# install leaves raftlog's ~180 modules uncompiled, and where PYTHONDONTWRITEBYTECODE is set
# (or the tree is read-only) Python never caches them, so every peer, CLI and Spark worker
# compiled them all again at start: ~0.27 s of CPU per process, on every start the suite
# makes. Python reads bytecode even where it may not write it.
BYTECODE = $(BIN)/python -m compileall -q

# The full developer set-up (what `make test`, `make lint` and `make bench` use).
install: $(TEST_STAMP)
	$(BYTECODE) raftlog integrations/spark tests bench

# Only the runtime dependencies: peers and CLIs.
install-run: $(RUN_STAMP)
	$(BYTECODE) raftlog

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(PIP) install --upgrade pip

# The install also builds raftlog._speedups_* (raftlog/_speedups_*.c) when a C compiler and
# Python's headers are there; without them it still succeeds and the pure-Python twins run
# (raftlog/speedups.py). `make test` installs both first, so that CI tests the compiled twins.
$(RUN_STAMP): pyproject.toml $(wildcard raftlog/_speedups_*.c) | $(BIN)/python
	$(PIP) install -e .
	touch $@

$(TEST_STAMP): pyproject.toml $(wildcard raftlog/_speedups_*.c) | $(BIN)/python compiler
	$(PIP) install -e '.[spark,dev]'
	# Spark finds the "raftlog" format by scanning sys.path (pkgutil), which cannot see
	# packages served by the editable install's import hook: put their directory on it.
	$(BIN)/python -c "import pathlib, site; pathlib.Path(site.getsitepackages()[0], 'raftlog-spark.pth').write_text('$(CURDIR)/integrations/spark\n')"
	touch $@ $(RUN_STAMP)

# Start the local three-peer cluster (cluster-configs/local-3.toml) in the foreground;
# Ctrl-C stops all peers. Data lives in ./data/<id>. The launcher prints how to put the
# CLIs (raftlog-admin, raftlog-tool, ...) on PATH.
run: install-run
	$(BIN)/raftlog-local-cluster cluster-configs/local-3.toml

# The same cluster with CURVE encryption and authentication (cluster-configs/local-3-secure.toml);
# the first run creates the keys in ./keys (the admin key is what raftlog-admin then uses), a
# local CA with the peers' HTTPS certificate and a bearer token, and prints a working curl line.
run-secure: install-run
	$(BIN)/raftlog-admin keys init --config cluster-configs/local-3-secure.toml
	$(BIN)/raftlog-local-cluster cluster-configs/local-3-secure.toml

# Install the Node.js reference (npm zmq-raft) into .interop/ for the interop tests
# (recipe: tests/interop/reference_pkg/package.json; why: tests/interop/README.md).
interop:
	bash tests/interop/install_reference.sh

# Debian's chromium for the status-page browser test (tests/integration/browser), which
# Playwright drives through executable_path: it never downloads a browser of its own.
# Installed when missing and we are root; otherwise the test skips and says why.
browser:
	@if command -v chromium >/dev/null 2>&1; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium) \
	  >/dev/null || echo "make browser: could not install chromium; the browser test skips"; \
	else echo "make browser: chromium missing and not root; the browser test skips"; fi

# Debian's fuse3 (fusermount3 + libfuse3) for the power-cut tests' lazy file system
# (tests/faults/lazyfs, through mfusepy from the dev extra). Installed when missing and we are
# root; otherwise, or without /dev/fuse, those tests skip and say why.
fuse:
	@if command -v fusermount3 >/dev/null 2>&1 && ldconfig -p | grep -q libfuse3; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq fuse3) \
	  >/dev/null || echo "make fuse: could not install fuse3; the power-cut tests skip"; \
	else echo "make fuse: fuse3 missing and not root; the power-cut tests skip"; fi

# A C compiler and the interpreter's headers, to build raftlog._speedups_*. Installed when
# missing and we are root; otherwise the install builds no extension, the pure-Python twins
# run, and the tests that compare both say why they skip.
PY_HEADERS_OK := import os, sys, sysconfig; sys.exit(not os.path.exists(os.path.join(sysconfig.get_paths()['include'], 'Python.h')))
compiler:
	@if command -v cc >/dev/null 2>&1 && $(PYTHON) -c "$(PY_HEADERS_OK)"; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	  dev=python$$($(PYTHON) -c 'import sys; print("%d.%d" % sys.version_info[:2])')-dev; \
	  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq gcc libc6-dev \
	    $$($(PYTHON) -c "$(PY_HEADERS_OK)" || echo $$dev)) >/dev/null \
	  || echo "make compiler: could not install gcc/$$dev; the pure-Python twins run"; \
	else echo "make compiler: no C compiler or Python headers and not root; the pure-Python twins run"; fi

# Debian's kcat for the Kafka listener's tests (tests/integration/kafka): a Kafka client
# nobody here wrote. Installed when missing and we are root; otherwise those tests skip.
kcat:
	@if command -v kcat >/dev/null 2>&1; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq kcat) \
	  >/dev/null || echo "make kcat: could not install kcat; its Kafka tests skip"; \
	else echo "make kcat: kcat missing and not root; its Kafka tests skip"; fi

# --durations=25: every run (CI included) ends with its 25 slowest tests, so a test that
# grows slow shows up where it is run rather than in the next suite-time hunt.
test: install interop browser fuse kcat
	$(BIN)/python -m pytest -q -n $(PYTEST_WORKERS) --dist loadgroup $(PYTEST_ARGS)

lint: install
	$(BIN)/ruff check raftlog tests integrations/spark
	$(BIN)/mypy --strict raftlog integrations/spark/raftlog_spark

# The cluster suite runs the reference zmq-raft beside raftlog: `interop` installs it (once;
# a no-op when it is there), so `make bench` works from a fresh clone.
bench: install interop
	$(BIN)/python -m bench $(BENCH)

# Fault schedules against real peers, long and with many seeds; writes the table in
# docs/reliability.md. RAFTLOG_CHAOS_MINUTES (10), RAFTLOG_CHAOS_SECONDS (30 per run),
# RAFTLOG_CHAOS_SEED, RAFTLOG_CHAOS_SCHEDULES=a,b (see tests/faults/chaos.py).
.PHONY: chaos chaos-power chaos-mixed soak stability
chaos: install fuse
	PYTHONPATH=tests $(BIN)/python -m faults.chaos

# Only the power-cut schedules (lazy file systems under every peer), into their own table of
# docs/reliability.md; RAFTLOG_CHAOS_MINUTES etc. as for chaos.
POWER_SCHEDULES := power_cut_all,power_cut_leader,power_cut_install_snapshot,power_cut_after_vote,power_cut_compaction
chaos-power: install fuse
	PYTHONPATH=tests RAFTLOG_CHAOS_SCHEDULES=$${RAFTLOG_CHAOS_SCHEDULES:-$(POWER_SCHEDULES)} \
	  RAFTLOG_CHAOS_TABLE=power-table $(BIN)/python -m faults.chaos

# Mixed clusters (raftlog and reference peers) under random kill -9 and pauses, with the
# reference's client writing: RAFTLOG_MIXED_ROUNDS runs (3) of each shape, a new seed each,
# RAFTLOG_MIXED_FAULT_SECONDS (120) of faults per run; tests/interop/test_mixed_faults.py.
chaos-mixed: install interop
	for round in $$(seq $${RAFTLOG_MIXED_ROUNDS:-3}); do \
	  RAFTLOG_MIXED_FAULT_SECONDS=$${RAFTLOG_MIXED_FAULT_SECONDS:-120} $(BIN)/python -m pytest \
	    -q -s -p no:cacheprovider tests/interop/test_mixed_faults.py -k random || exit 1; \
	done

# Long mixed load with faults; samples peers' RSS, fds and disk use (not in CI).
# RAFTLOG_SOAK_MINUTES (30), RAFTLOG_SOAK_DOC (docs/reliability.md; - to only print).
soak: install
	PYTHONPATH=tests $(BIN)/python -m faults.soak

# Elections with a healthy leader under a CPU hog and load. RAFTLOG_STABILITY_SECONDS (300).
stability: install
	PYTHONPATH=tests $(BIN)/python -m faults.stability
