"""Suite-wide hooks: how ``make test`` spreads the tests over two pytest-xdist workers.

Why groups: ``make test`` runs ``pytest -n 2 --dist loadgroup`` (the suite is mostly waiting
on real processes -- elections, fsyncs, JVMs -- so two workers finish it in about three
quarters of the time: 909 against 1,222 s on two cores with a CPU hog on one). Plain
per-test distribution would start a module's shared cluster (``scope="module"`` fixtures)
once per worker, and ``tests/spark``'s SparkSession and loaded cluster (``scope="session"``)
twice. So every test is grouped by its file, and all of ``tests/spark`` is one group: each
group runs on one worker, in file order. Without xdist the marks are inert.
"""

from __future__ import annotations

import pytest

SPARK_DIR = ("tests", "spark")
"""The tests that share one SparkSession: one group, one worker."""


def xdist_group_of(relative_parts: tuple[str, ...]) -> str:
    """The worker group of a test file given by its path parts below the repository root."""
    if relative_parts[: len(SPARK_DIR)] == SPARK_DIR:
        return "/".join(SPARK_DIR)
    return "/".join(relative_parts)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark every test with its ``xdist_group`` (xdist reads the marks after this hook)."""
    root = config.rootpath
    for item in items:
        try:
            parts = item.path.relative_to(root).parts
        except ValueError:  # a test outside the repository (never collected by make test)
            parts = item.path.parts
        item.add_marker(pytest.mark.xdist_group(xdist_group_of(parts)))
