"""The consensus core stays pure: no I/O, clock, threads or global randomness can creep in.

Walks the AST of every module of ``raftlog.consensus`` (imports inside functions included) and
checks each imported module against an allow-list.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import raftlog.consensus

PACKAGE_DIR = Path(raftlog.consensus.__file__).parent

ALLOWED_STDLIB = {
    "__future__",
    "bisect",
    "collections",
    "collections.abc",
    "dataclasses",
    "enum",
    "functools",
    "heapq",
    "itertools",
    "math",
    "operator",
    "typing",
}
ALLOWED_PROJECT = {
    "raftlog.bounds",
    "raftlog.entry",
    "raftlog.errors",
    "raftlog.ids",
    "raftlog.rpc.messages",
    "raftlog.rpc.config",
    "raftlog.rpc.ranges",
    "raftlog.speedups",  # which twin of a pure loop runs (consensus/batch.py); both pure
    "raftlog.storage.base",
}
FORBIDDEN_NAMES_FROM = {"random": {"Random"}}
"""``random`` may only be imported for the ``Random`` type; module-level functions share a
global generator and would make runs unrepeatable."""

FORBIDDEN_IDS_NAMES = {"RequestIdGenerator", "machine_id"}
"""``raftlog.ids`` reads the clock, the pid and the host name in these; only its pure
functions are allowed."""


def _imports(path: Path) -> list[tuple[str, tuple[str, ...], int]]:
    tree = ast.parse(path.read_text(), filename=str(path))
    found: list[tuple[str, tuple[str, ...], int]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.extend((alias.name, (), node.lineno) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if node.level:
                module = "raftlog.consensus" + (f".{module}" if module else "")
            found.append((module, tuple(alias.name for alias in node.names), node.lineno))
    return found


MODULES = sorted(PACKAGE_DIR.glob("*.py"))


def test_consensus_package_has_modules() -> None:
    assert len(MODULES) >= 10


@pytest.mark.parametrize("path", MODULES, ids=lambda p: p.name)
def test_consensus_module_imports_only_pure_modules(path: Path) -> None:
    problems = []
    for module, names, line in _imports(path):
        where = f"{path.name}:{line}"
        if module == "raftlog.consensus" or module.startswith("raftlog.consensus."):
            continue
        if module in FORBIDDEN_NAMES_FROM:
            if not names or set(names) - FORBIDDEN_NAMES_FROM[module]:
                problems.append(f"{where}: only `from random import Random` is allowed")
            continue
        if module == "raftlog.ids" and (not names or set(names) & FORBIDDEN_IDS_NAMES):
            problems.append(f"{where}: impure names from raftlog.ids: {names}")
            continue
        if module not in ALLOWED_STDLIB and module not in ALLOWED_PROJECT:
            problems.append(f"{where}: imports {module}")
    assert not problems, "\n".join(problems)


def test_purity_check_catches_a_forbidden_import(tmp_path: Path) -> None:
    """Negative control: the walker sees imports anywhere, including inside functions."""
    bad = tmp_path / "bad.py"
    bad.write_text("def f():\n    import time\n    from random import randint\n")
    modules = {module for module, _, _ in _imports(bad)}
    assert {"time", "random"} <= modules
