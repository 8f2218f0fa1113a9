"""Streaming: Trigger.AvailableNow in micro-batches of maxEntriesPerTrigger entries, a failure
in the middle, a restart from the checkpoint, then new entries -- every record exactly once."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
from integration.cluster import PeerCluster
from pyspark.errors import StreamingQueryException
from pyspark.sql import DataFrame, SparkSession

from .conftest import source_options
from .helpers import last_index, log_rows, publish, sample_entries, spark_rows

pytestmark = pytest.mark.timeout(240)

PER_TRIGGER = 25


def _run(
    spark: SparkSession,
    cluster: PeerCluster,
    first: int,
    out: Path,
    checkpoint: Path,
    fail_batch: int | None = None,
) -> None:
    def sink(batch: DataFrame, batch_id: int) -> None:
        if batch_id == fail_batch:
            raise RuntimeError(f"injected failure in micro-batch {batch_id}")
        # idempotent per micro-batch: a replayed batch overwrites its own output
        batch.write.mode("overwrite").parquet(str(out / f"batch={batch_id}"))

    options: dict[str, Any] = source_options(
        cluster, startingOffsets=first, maxEntriesPerTrigger=PER_TRIGGER
    )
    query = (
        spark.readStream.format("raftlog")
        .options(**options)
        .load()
        .writeStream.foreachBatch(sink)
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    try:
        assert query.awaitTermination(180), "the availableNow query did not finish"
    finally:
        query.stop()


def test_available_now_restart_from_checkpoint_exactly_once(
    spark: SparkSession, log_cluster: PeerCluster, tmp_path: Path
) -> None:
    first = last_index(log_cluster) + 1
    publish(log_cluster, sample_entries(7, 60), concurrency=4)
    out, checkpoint = tmp_path / "out", tmp_path / "checkpoint"

    with pytest.raises(StreamingQueryException, match="injected failure in micro-batch 1"):
        _run(spark, log_cluster, first, out, checkpoint, fail_batch=1)
    assert sorted(p.name for p in out.iterdir()) == ["batch=0"]

    _run(spark, log_cluster, first, out, checkpoint)  # replays batch 1 with its logged offsets
    middle = last_index(log_cluster)
    assert len(list(out.iterdir())) == math.ceil((middle - first + 1) / PER_TRIGGER)

    publish(log_cluster, sample_entries(8, 20), concurrency=4)
    _run(spark, log_cluster, first, out, checkpoint)  # only what was added since

    got = spark_rows(spark.read.parquet(str(out)).drop("batch"))
    assert got == log_rows(log_cluster, first)
    assert len({(r[0], r[1]) for r in got}) == len(got)
    assert {r[0] for r in got} >= {middle + 1, last_index(log_cluster)}
