# raftlog developer commands. Everything runs inside ./.venv, created on demand.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
PYTEST_ARGS ?=

.PHONY: install test lint interop run

install: $(STAMP)

# Re-install only when the package metadata changes.
$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[spark,dev]'
	touch $(STAMP)

# Start the local three-peer cluster (cluster-configs/local-3.toml) in the foreground;
# Ctrl-C stops all peers. Data lives in ./data/<id>.
run: install
	$(BIN)/raftlog-local-cluster cluster-configs/local-3.toml

# Install the Node.js reference (npm zmq-raft) into .interop/ for the interop tests.
interop:
	bash tests/interop/install_reference.sh

test: install interop
	$(BIN)/python -m pytest -q $(PYTEST_ARGS)

lint: install
	$(BIN)/ruff check raftlog tests
	$(BIN)/mypy --strict raftlog

.PHONY: bench
bench: install
	$(BIN)/python -m bench $(BENCH)
