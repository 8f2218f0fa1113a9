"""The peer a task streams from, killed (SIGKILL) mid-read: the read still completes, with
exactly the rows of the log. local[2] never retries a failed task, so a pass means the
task's own client went on elsewhere mid-stream: to the new leader when the killed peer led,
to the leader when it was a follower serving committed reads (the planner sends partition
0 to the first peer of the cluster's configuration).

The kill comes from a downstream ``mapInArrow`` as soon as the first rows reach it. A reader
can run ahead of its consumer only as far as the buffers between them hold: about 9 MB here
(measured: a source producing while its consumer sleeps on the first batch). The range holds
~24 MB, so at the kill most of it is still to be streamed -- from the next leader."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest
from pyspark.sql import SparkSession
from raftlog_spark.logclient import LogClient

from raftlog.topics.records import Record, encode_records

from .conftest import source_options
from .helpers import log_rows, publish, spark_rows, start_cluster, stop_cluster

pytestmark = pytest.mark.timeout(240)

ENTRIES = 400
RECORDS_PER_ENTRY = 60
VALUE = b"x" * 1000  # 400 x 60 x 1000 B = 24 MB, beyond the ~9 MB a reader can run ahead


def test_serving_peer_killed_mid_read_still_completes(spark: SparkSession, tmp_path: Path) -> None:
    (tmp_path / "cluster").mkdir()
    cluster = start_cluster(tmp_path / "cluster", "raftlog-spark-failover")
    try:
        datas = [
            encode_records(
                [
                    Record("events", b"e-%d-%d-" % (n, k) + b"x" * 150)
                    for k in range(RECORDS_PER_ENTRY)
                ]
            )
            for n in range(ENTRIES)
        ]
        publish(cluster, datas)
        expected = log_rows(cluster)
        leader = cluster.wait_stable_leader()
        with LogClient(tuple(cluster.urls), cluster.ident, 10.0) as client:
            first_url = client.cluster_urls()[0]
        serving = next(p.id for p in cluster.peers.values() if p.url == first_url)
        process = cluster.peers[serving].process
        assert process is not None
        pid, marker = process.pid, tmp_path / "killed-at"

        def kill_leader_on_first_rows(
            batches: Iterator[pa.RecordBatch],
        ) -> Iterator[pa.RecordBatch]:
            for batch in batches:
                try:
                    fd = os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
                except FileExistsError:
                    pass
                else:  # the first rows: the read is under way
                    os.write(fd, str(batch.column("index")[batch.num_rows - 1]).encode())
                    os.close(fd)
                    os.kill(pid, signal.SIGKILL)
                time.sleep(0.002)  # a slow consumer: the readers cannot run far ahead
                yield batch

        spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", "200")
        try:
            df = (
                spark.read.format("raftlog")
                .options(**source_options(cluster, numPartitions=1, rowsPerBatch=200, timeout=30))
                .load()
            )
            started = time.monotonic()
            got = spark_rows(df.mapInArrow(kill_leader_on_first_rows, df.schema))
            elapsed = time.monotonic() - started
        finally:
            spark.conf.unset("spark.sql.execution.arrow.maxRecordsPerBatch")

        killed_at = int(marker.read_text())
        assert process.poll() is not None, "the leader was killed"
        assert killed_at < 10, "the kill landed on the first rows of the range"
        assert got == expected
        if serving == leader:
            assert cluster.wait_stable_leader() != leader
        role = "leader" if serving == leader else "follower"
        print(f"{role} {serving} killed after index {killed_at}; read finished in {elapsed:.1f}s")
    finally:
        stop_cluster(cluster)
