"""Fixtures of the Spark source tests: one local[2] SparkSession and one loaded three-peer
cluster for the whole session (Spark start-up is the slow part), plus the source options."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from typing import Any

import pytest

try:  # the tests need the [spark] extra (and Java); without it they are not collected
    import pyarrow  # noqa: F401
    import pyspark
except ImportError:
    collect_ignore_glob = ["test_*.py"]
else:
    if tuple(int(p) for p in pyspark.__version__.split(".")[:2]) < (4, 1):
        collect_ignore_glob = ["test_*.py"]

from integration.cluster import PeerCluster

IDENT = "raftlog-spark-test"


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    import raftlog_spark  # noqa: PLC0415 - conftest must import without pyspark
    from pyspark.sql import SparkSession  # noqa: PLC0415

    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    session = (
        SparkSession.builder.master("local[2]")
        .appName("raftlog-spark-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.python.filterPushdown.enabled", "true")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.host", "127.0.0.1")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    raftlog_spark.register(session)
    try:
        yield session
    finally:
        session.stop()


@pytest.fixture(scope="session")
def log_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PeerCluster]:
    """A running cluster holding raw entries, topic records and admin entries."""
    from .helpers import load_phases, start_cluster, stop_cluster  # noqa: PLC0415

    cluster = start_cluster(tmp_path_factory.mktemp("spark-cluster"), IDENT)
    try:
        load_phases(cluster)
        yield cluster
    finally:
        stop_cluster(cluster)


def source_options(cluster: PeerCluster, **extra: Any) -> dict[str, str]:
    options = {"peers": ",".join(cluster.urls), "ident": cluster.ident}
    options.update({k: str(v) for k, v in extra.items()})
    return options
