"""The machine line every benchmark section records names the interpreter's build, not only its
version: two builds of one CPython minor version differ by more than many changes the benches
measure (docs/performance.md section 1), so a reader must be able to tell them apart."""

from __future__ import annotations

import importlib
import platform
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_machine_line_names_the_interpreters_version_prefix_and_compiler() -> None:
    sys.path.insert(0, str(ROOT))
    try:
        bench_main = importlib.import_module("bench.__main__")
    finally:
        sys.path.remove(str(ROOT))
    line = bench_main._machine()
    assert f"Python {platform.python_version()} ({sys.base_prefix}," in line
    assert platform.python_compiler() in line
