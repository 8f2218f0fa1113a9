"""``docs/architecture.md`` names every package of ``raftlog/`` and nothing that is not one
(issue #26): the map a newcomer reads first cannot drift from the tree."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "architecture.md"


def documented_packages(text: str) -> set[str]:
    """The ``raftlog/<name>/`` cells of the table between the package markers."""
    block = text.split("<!-- packages:start -->", 1)[1].split("<!-- packages:end -->", 1)[0]
    return set(re.findall(r"^\| `raftlog/(\w+)/` \|", block, flags=re.M))


def test_the_checker_reads_the_table() -> None:
    sample = "<!-- packages:start -->\n| `raftlog/a/` | x |\n| b | y |\n<!-- packages:end -->"
    assert documented_packages(sample) == {"a"}


def test_the_architecture_doc_lists_exactly_the_packages_in_the_tree() -> None:
    tree = {p.parent.name for p in (ROOT / "raftlog").glob("*/__init__.py")}
    assert "topics" in tree
    assert documented_packages(DOC.read_text(encoding="utf-8")) == tree


def test_the_recipes_name_files_that_exist() -> None:
    text = DOC.read_text(encoding="utf-8")
    recipes = text.split("## Recipes", 1)[1].split("## 2.", 1)[0]
    named = set(re.findall(r"`(raftlog/[\w/]+\.py)`", recipes))
    assert len(named) >= 10
    assert {n for n in named if not (ROOT / n).is_file()} == set()
