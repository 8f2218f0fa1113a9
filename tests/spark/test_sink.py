"""The sink in this session: rows written with df.write / writeStream come back exactly, as
records (topic, key, value, headers) and raw entries; a replayed micro-batch appends nothing.
Killing executors and the driver mid-write: test_sink_faults.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from integration.cluster import PeerCluster
from pyspark.sql import SparkSession
from pyspark.sql import functions as F  # noqa: N812
from pyspark.sql.types import BinaryType, MapType, StringType, StructField, StructType
from raftlog_spark.anchors import ANCHOR_TOPIC

from .conftest import source_options
from .helpers import last_index, log_rows

pytestmark = pytest.mark.timeout(240)

SCHEMA = StructType(
    [
        StructField("topic", StringType(), True),
        StructField("key", BinaryType(), True),
        StructField("value", BinaryType(), False),
        StructField("headers", MapType(StringType(), BinaryType()), True),
    ]
)


def _write(df: Any, cluster: PeerCluster, **options: Any) -> None:
    df.write.format("raftlog").options(**source_options(cluster, **options)).mode("append").save()


def test_batch_write_round_trip_records_and_raw_entries(
    spark: SparkSession, log_cluster: PeerCluster
) -> None:
    rows = [
        ("orders", b"k1", b"first", {"h": b"1"}),
        ("audit", None, b"second", None),
        (None, None, b"raw-from-spark", None),
        ("orders", b"k2", b"third", {}),
    ] * 30
    before = last_index(log_cluster)
    df = spark.createDataFrame(rows, SCHEMA).repartition(3)
    _write(df, log_cluster, recordsPerEntry=7)
    written = log_rows(log_cluster, before + 1)
    got = sorted(((r[3], r[4], r[5], r[6]) for r in written), key=repr)
    expected = sorted(((t, k, v, h or {}) for t, k, v, h in rows), key=repr)
    assert got == expected
    entries = {r[0] for r in written}
    assert len(entries) < len(rows)  # records were batched into entries
    assert sum(1 for r in written if r[3] is None) == 30  # raw rows are one entry each

    # only a value column and a topic option
    before = last_index(log_cluster)
    values = spark.range(50).select(F.col("id").cast("string").alias("value"))
    _write(values, log_cluster, topic="audit")
    assert sorted(int(r[5]) for r in log_rows(log_cluster, before + 1)) == list(range(50))
    assert {r[3] for r in log_rows(log_cluster, before + 1)} == {"audit"}


def test_sink_refuses_bad_frames_and_options(spark: SparkSession, log_cluster: PeerCluster) -> None:
    with pytest.raises(Exception, match="needs a value column"):
        _write(spark.range(3), log_cluster)
    with pytest.raises(Exception, match="unexpected column"):
        _write(spark.range(3).select(F.lit(b"x").alias("value"), "id"), log_cluster)
    with pytest.raises(Exception, match="unknown option"):
        _write(spark.range(3).select(F.lit(b"x").alias("value")), log_cluster, topics="a")


def test_stream_write_copies_a_topic_exactly_once_across_a_restart(
    spark: SparkSession, log_cluster: PeerCluster, tmp_path: Path
) -> None:
    """raftlog -> raftlog: the orders records of the log copied into topic metrics.cpu by a
    stream; the query runs twice from the same checkpoint (the second run replays the last
    micro-batch because its commit is removed) and the copy holds every record once."""
    checkpoint = tmp_path / "checkpoint"
    start = last_index(log_cluster)

    def run() -> None:
        query = (
            spark.readStream.format("raftlog")
            .options(
                **source_options(
                    log_cluster,
                    topics="orders",
                    startingOffsets="earliest",
                    maxRecordsPerTrigger=40,
                )
            )
            .load()
            .where(F.col("index") <= start)
            .select(F.lit("metrics.cpu").alias("topic"), "key", "value")
            .writeStream.format("raftlog")
            .options(**source_options(log_cluster))
            .option("checkpointLocation", str(checkpoint))
            .trigger(availableNow=True)
            .start()
        )
        try:
            assert query.awaitTermination(180)
        finally:
            query.stop()

    run()
    # the ids' anchor is kept in the cluster, not in the checkpoint (which may be HDFS/S3)
    assert not (checkpoint / "raftlog-sink").exists()
    assert any(r[3] == ANCHOR_TOPIC for r in log_rows(log_cluster, start + 1, internal=True))
    everything = spark.read.format("raftlog").options(**source_options(log_cluster)).load()
    assert everything.where(F.col("topic") == ANCHOR_TOPIC).count() == 0  # no data rows
    copied = [r for r in log_rows(log_cluster, start + 1) if r[3] == "metrics.cpu"]
    commits = sorted(
        (checkpoint / "commits").iterdir(), key=lambda p: int(p.name) if p.name.isdigit() else -1
    )
    assert len(commits) >= 2  # several micro-batches of at most 40 records
    last = commits[-1]
    last.unlink()  # as if the driver died after writing, before committing
    last.with_name(f".{last.name}.crc").unlink(missing_ok=True)
    run()  # replays the last micro-batch: the same request ids, nothing appended
    again = [r for r in log_rows(log_cluster, start + 1) if r[3] == "metrics.cpu"]
    orders = [r for r in log_rows(log_cluster, 1, start) if r[3] == "orders"]
    assert len(again) == len(copied) == len(orders)
    assert sorted(r[5] for r in again) == sorted(r[5] for r in orders)
