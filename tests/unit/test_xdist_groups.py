"""The worker groups of ``make test`` (tests/conftest.py): a file's tests stay together, and
every Spark test shares one worker, so module- and session-scoped clusters start once."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

_SPEC = importlib.util.spec_from_file_location(
    "suite_conftest", Path(__file__).resolve().parents[1] / "conftest.py"
)
assert _SPEC is not None and _SPEC.loader is not None
conftest = importlib.util.module_from_spec(_SPEC)  # by path: "conftest" names several files
_SPEC.loader.exec_module(conftest)


def test_every_spark_file_is_one_group() -> None:
    a = conftest.xdist_group_of(("tests", "spark", "test_batch.py"))
    b = conftest.xdist_group_of(("tests", "spark", "test_sink_faults.py"))
    assert a == b == "tests/spark"


def test_other_files_are_a_group_each() -> None:
    a = conftest.xdist_group_of(("tests", "integration", "peer", "test_signals.py"))
    b = conftest.xdist_group_of(("tests", "integration", "peer", "test_entries_bursts.py"))
    assert a == "tests/integration/peer/test_signals.py"
    assert a != b
    assert conftest.xdist_group_of(("tests", "sparkling", "test_x.py")) != "tests/spark"


def test_this_test_carries_its_files_group(request: pytest.FixtureRequest) -> None:
    mark = request.node.get_closest_marker("xdist_group")
    assert mark is not None
    assert mark.args == ("tests/unit/test_xdist_groups.py",)
