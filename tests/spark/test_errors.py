"""Issue #31's error cases, as a Spark user meets them: options invalid for a stream refused
with the source's one line (not PySpark's ``UnboundLocalError: reader``), an unknown host
named as such, and a cluster that goes away mid-read reported as what it is -- which peers
refused -- without a worker traceback."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from integration.cluster import PeerCluster
from pyspark.sql import SparkSession

from raftlog.topics.records import Record, encode_records

from .conftest import source_options
from .helpers import publish, start_cluster, stop_cluster

pytestmark = pytest.mark.timeout(240)

PYTHON_TRACEBACK = "Traceback (most recent call last)"


def _error_of(action: Any) -> str:
    with pytest.raises(Exception) as caught:  # Spark wraps the source's error
        action()
    return str(caught.value)


def test_batch_only_options_on_a_stream_are_refused_in_one_line(
    spark: SparkSession, log_cluster: PeerCluster, tmp_path: Path
) -> None:
    def start() -> None:
        query = (
            spark.readStream.format("raftlog")
            .options(**source_options(log_cluster, endingIndex=5, pushFilters="true"))
            .load()
            .writeStream.format("noop")
            .option("checkpointLocation", str(tmp_path / "checkpoint"))
            .trigger(availableNow=True)
            .start()
        )
        try:
            query.awaitTermination(120)
        finally:
            query.stop()

    message = _error_of(start)
    expected = "option endingIndex, pushFilters applies to batch reads (spark.read) only"
    assert expected in message, message
    assert "UnboundLocalError" not in message and PYTHON_TRACEBACK not in message, message


def test_an_unknown_host_is_reported_as_such(spark: SparkSession) -> None:
    url = "tcp://no-such-host.invalid:8047"
    message = _error_of(
        lambda: spark.read.format("raftlog").options(peers=url, ident="x", timeout="1").load()
    )
    assert f"{url}: unknown host (the name does not resolve)" in message, message


def test_a_cluster_gone_mid_read_is_reported_in_one_line(
    spark: SparkSession, tmp_path: Path
) -> None:
    """Every peer killed once the first rows reach Spark: the task reports that every peer
    refused the connection, naming them, in one line (no worker traceback)."""
    (tmp_path / "cluster").mkdir()
    cluster = start_cluster(tmp_path / "cluster", "raftlog-spark-gone")
    pids = cluster.pids()
    marker = tmp_path / "killed"
    try:
        value = b"x" * 1000
        publish(cluster, [encode_records([Record("t", value)] * 60) for _ in range(400)])

        def kill_all_on_first_rows(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
            for batch in batches:
                if not marker.exists():
                    marker.write_text("1")
                    for pid in pids:
                        os.kill(pid, signal.SIGKILL)
                time.sleep(0.002)  # a slow consumer: the reader cannot run far ahead
                yield batch

        spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", "200")
        try:
            df = (
                spark.read.format("raftlog")
                .options(**source_options(cluster, numPartitions=1, rowsPerBatch=200, timeout=3))
                .load()
            )
            message = _error_of(lambda: df.mapInArrow(kill_all_on_first_rows, df.schema).count())
        finally:
            spark.conf.unset("spark.sql.execution.arrow.maxRecordsPerBatch")
        assert marker.exists(), "the peers were killed mid-read"
        assert "raftlog source: the cluster did not answer (3." in message, message
        assert "every peer: refused the connection" in message, message
        assert all(url in message for url in cluster.urls), message
        assert "reading entries" in message and PYTHON_TRACEBACK not in message, message
    finally:
        stop_cluster(cluster)
