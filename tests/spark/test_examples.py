"""The examples in integrations/spark/examples, run in the test session: the batch job's
counts per topic per minute, and the streaming copy to Parquet (availableNow)."""

from __future__ import annotations

import importlib.util
from collections import Counter
from pathlib import Path
from types import ModuleType

import pytest
from integration.cluster import PeerCluster
from pyspark.sql import SparkSession
from pyspark.sql import functions as F  # noqa: N812

from .helpers import log_rows

pytestmark = pytest.mark.timeout(240)

EXAMPLES = Path(__file__).resolve().parents[2] / "integrations" / "spark" / "examples"


def example(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        f"raftlog_example_{name}", EXAMPLES / f"{name}.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_batch_example_counts_records_per_topic_per_minute(
    spark: SparkSession, log_cluster: PeerCluster
) -> None:
    job = example("batch_topic_counts")
    counts = job.topic_counts_per_minute(spark, log_cluster.urls, log_cluster.ident)
    got = {
        (minute, topic): n
        for minute, topic, n in counts.select(F.unix_millis("minute"), "topic", "count").collect()
    }
    rows = log_rows(log_cluster)
    assert got == dict(Counter((r[7] // 60_000 * 60_000, r[3]) for r in rows if r[3] is not None))
    only = job.topic_counts_per_minute(spark, log_cluster.urls, log_cluster.ident, topics=["audit"])
    assert {r["topic"] for r in only.collect()} == {"audit"}


def test_stream_example_copies_every_record_once(
    spark: SparkSession, log_cluster: PeerCluster, tmp_path: Path
) -> None:
    job = example("stream_to_parquet")
    out, checkpoint = tmp_path / "records", tmp_path / "checkpoint"
    query = job.start_copy(
        spark,
        log_cluster.urls,
        log_cluster.ident,
        str(out),
        str(checkpoint),
        available_now=True,
        max_entries_per_trigger=200,
    )
    assert query.awaitTermination(180)
    copied = spark.read.parquet(str(out)).select("index", "position", "topic", "value").collect()
    got = sorted((i, p, t, bytes(v)) for i, p, t, v in copied)
    expected = [(r[0], r[1], r[3], r[5]) for r in log_rows(log_cluster) if r[3] is not None]
    assert got == expected  # from the first index in the log to where it was at the start
