"""Every ``raftlog/....py`` file that README.md or a page of docs/ names exists: a module that
moves (a split, a new home) takes the docs that point at it along, or this fails."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PATH = re.compile(r"\braftlog/[\w/]+\.py\b")


def named_paths(text: str) -> set[str]:
    """The ``raftlog/<...>.py`` paths a text names."""
    return set(PATH.findall(text))


def test_the_checker_finds_paths_in_prose_and_code_spans() -> None:
    text = "see `raftlog/web/auth.py` and raftlog/topics/reads.py, not raftlog/ alone"
    assert named_paths(text) == {"raftlog/web/auth.py", "raftlog/topics/reads.py"}


def test_every_raftlog_file_the_docs_name_exists() -> None:
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    missing = {
        f"{page.relative_to(ROOT)}: {path}"
        for page in pages
        for path in named_paths(page.read_text(encoding="utf-8"))
        if not (ROOT / path).is_file()
    }
    assert missing == set()
