"""Docstrings that say why on every public name of ``raftlog/server``, ``raftlog/statemachine``,
``raftlog/cli`` and (issue #26) ``raftlog/rpc``, ``raftlog/storage``, ``raftlog/consensus``
(modules, classes, functions, methods and properties; names starting with an underscore are
private; dunder methods and Protocol/enum members inherit their meaning)."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("server", "statemachine", "cli", "rpc", "storage", "consensus")


def public_names_without_docstring(path: Path) -> Iterator[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    if ast.get_docstring(tree) is None:
        yield "<module>"
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            if node.name.startswith("_"):
                continue
            if ast.get_docstring(node) is None:
                yield node.name
            if isinstance(node, ast.ClassDef):
                for member in node.body:
                    if (
                        isinstance(member, ast.FunctionDef | ast.AsyncFunctionDef)
                        and not member.name.startswith("_")
                        and ast.get_docstring(member) is None
                    ):
                        yield f"{node.name}.{member.name}"


def test_the_checker_sees_a_missing_docstring(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text(
        '"""Doc."""\nclass A:\n    """Doc."""\n    def f(self): pass\ndef _g(): pass\n'
    )
    assert list(public_names_without_docstring(sample)) == ["A.f"]


@pytest.mark.parametrize("package", PACKAGES)
def test_every_public_name_has_a_docstring(package: str) -> None:
    missing = [
        f"{path.relative_to(ROOT)}: {name}"
        for path in sorted((ROOT / "raftlog" / package).rglob("*.py"))
        for name in public_names_without_docstring(path)
    ]
    assert missing == [], "\n".join(missing)
