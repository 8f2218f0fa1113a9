# raftlog developer commands. Everything runs inside ./.venv, created on demand.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
PYTEST_ARGS ?=

.PHONY: install test lint

install: $(STAMP)

# Re-install only when the package metadata changes.
$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[spark,dev]'
	touch $(STAMP)

test: install
	$(BIN)/python -m pytest -q $(PYTEST_ARGS)

lint: install
	$(BIN)/ruff check raftlog tests
	$(BIN)/mypy --strict raftlog

.PHONY: bench
bench: install
	$(BIN)/python -m bench $(BENCH)
