"""Batch reads against a live three-peer cluster: the DataFrame equals the log, filters equal
a Python-side filter of the full read, planning narrows what is read, and bad input fails
at planning time with a clear message."""

from __future__ import annotations

import asyncio
import datetime as dt
import math
import time
from collections import Counter
from typing import Any

import pytest
from integration.cluster import PeerCluster, free_ports
from pyspark.sql import Column, SparkSession
from pyspark.sql import functions as F  # noqa: N812
from raftlog_spark.logclient import LogClient

from raftlog.client import RaftClient, SyncRaftClient
from raftlog.topics.client import TopicClient

from .conftest import source_options
from .helpers import Row, last_index, log_rows, spark_rows, where

pytestmark = pytest.mark.timeout(240)


def load(spark: SparkSession, cluster: PeerCluster, **options: Any) -> Any:
    return spark.read.format("raftlog").options(**source_options(cluster, **options)).load()


def test_full_read_equals_the_log_and_is_stable(
    spark: SparkSession, log_cluster: PeerCluster
) -> None:
    df = load(spark, log_cluster, numPartitions=3)
    expected = log_rows(log_cluster)
    assert df.rdd.getNumPartitions() == 3
    first = spark_rows(df)
    assert first == expected
    assert {r[3] for r in first} == {None, "orders", "audit", "metrics.cpu"}
    assert any(r[6] for r in first) and any(r[4] is None for r in first)

    # more entries after the DataFrame was created: it still reads the range pinned at load()
    with SyncRaftClient(log_cluster.urls, log_cluster.ident) as client:
        added = [client.request_update(b"late-%d" % n) for n in range(3)]
    assert spark_rows(df) == first
    assert df.count() == len(first)
    fresh = spark_rows(load(spark, log_cluster))
    assert fresh[: len(first)] == first
    assert [r[0] for r in fresh[len(first) :]] == added


def test_partitioning_and_range_options(spark: SparkSession, log_cluster: PeerCluster) -> None:
    everything = spark_rows(load(spark, log_cluster))
    top = last_index(log_cluster)
    assert load(spark, log_cluster, entriesPerPartition=10).rdd.getNumPartitions() == math.ceil(
        top / 10
    )
    assert load(spark, log_cluster, numPartitions=1000).rdd.getNumPartitions() == top

    df = load(spark, log_cluster, startingIndex=20, endingIndex=60, entriesPerPartition=7)
    assert df.rdd.getNumPartitions() == math.ceil(41 / 7)
    assert spark_rows(df) == where(everything, lambda r: 20 <= r[0] <= 60)

    # a time range covers [first entry stamped >= start, first entry stamped >= end)
    stamped = sorted({(r[0], r[7]) for r in everything if r[7] is not None})
    times = sorted({t for _, t in stamped})
    start, end = times[len(times) // 4], times[3 * len(times) // 4]
    lo = min(i for i, t in stamped if t >= start)
    hi = min(i for i, t in stamped if t >= end) - 1
    iso = dt.datetime.fromtimestamp(end / 1000, dt.UTC).isoformat()
    got = spark_rows(load(spark, log_cluster, startingTimestamp=start, endingTimestamp=iso))
    assert got == where(everything, lambda r: lo <= r[0] <= hi)
    assert got and any(r[3] is None for r in got)  # raw entries inside the range are rows too


def _cases(rows: list[Row]) -> list[tuple[str, Column, Any]]:
    indexes = sorted({r[0] for r in rows})
    a, b = indexes[len(indexes) // 5], indexes[len(indexes) // 2]
    picks = indexes[3::17]
    times = sorted({r[7] for r in rows if r[7] is not None})
    t1, t2 = times[len(times) // 3], times[2 * len(times) // 3]
    d1 = dt.datetime.fromtimestamp(t1 / 1000, dt.UTC)
    d2 = dt.datetime.fromtimestamp(t2 / 1000, dt.UTC)
    col = F.col
    return [
        ("topic =", col("topic") == "orders", lambda r: r[3] == "orders"),
        (
            "topic in",
            col("topic").isin("audit", "metrics.cpu"),
            lambda r: r[3] in ("audit", "metrics.cpu"),
        ),
        ("topic is null", col("topic").isNull(), lambda r: r[3] is None),
        ("topic <>", col("topic") != "orders", lambda r: r[3] is not None and r[3] != "orders"),
        ("not in", ~col("topic").isin("orders"), lambda r: r[3] is not None and r[3] != "orders"),
        (
            "prefix",
            col("topic").startswith("met"),
            lambda r: r[3] is not None and r[3].startswith("met"),
        ),
        ("<=> null", col("topic").eqNullSafe(None), lambda r: r[3] is None),
        ("index range", col("index").between(a, b), lambda r: a <= r[0] <= b),
        ("index in", col("index").isin(picks), lambda r: r[0] in picks),
        (
            "index > and topic",
            (col("index") > a) & (col("topic") == "audit"),
            lambda r: r[0] > a and r[3] == "audit",
        ),
        ("time >=", col("timestamp") >= F.lit(d1), lambda r: r[7] is not None and r[7] >= t1),
        ("time <", col("timestamp") < F.lit(d2), lambda r: r[7] is not None and r[7] < t2),
        (
            "time window and topics",
            (col("timestamp") > F.lit(d1))
            & (col("timestamp") <= F.lit(d2))
            & col("topic").isin("orders", "audit"),
            lambda r: r[7] is not None and t1 < r[7] <= t2 and r[3] in ("orders", "audit"),
        ),
        ("time is null", col("timestamp").isNull(), lambda r: r[7] is None),
        (
            "or (not pushed)",
            (col("topic") == "orders") | (col("index") < a),
            lambda r: r[3] == "orders" or r[0] < a,
        ),
        ("position (not pushed)", col("position") > 0, lambda r: r[1] > 0),
    ]


def test_filters_equal_a_python_filter_of_the_full_read(
    spark: SparkSession, log_cluster: PeerCluster
) -> None:
    everything = spark_rows(load(spark, log_cluster))
    # default: Spark applies every filter; one DataFrame serves every query
    df = load(spark, log_cluster, numPartitions=2)
    for name, condition, keep in _cases(everything):
        assert spark_rows(df.where(condition)) == where(everything, keep), name
    # pushFilters=true narrows reads by the pushed filters: a DataFrame per query (see
    # test_pushed_scan_reuse_cannot_give_a_wrong_count)
    for name, condition, keep in _cases(everything):
        pushed = load(spark, log_cluster, numPartitions=2, pushFilters="true")
        assert spark_rows(pushed.where(condition)) == where(everything, keep), name
    # Spark's default setting turns pushdown off: Spark filters, the result is the same
    spark.conf.set("spark.sql.python.filterPushdown.enabled", "false")
    try:
        off = load(spark, log_cluster, numPartitions=2, pushFilters="true")
        for name, condition, keep in _cases(everything):
            assert spark_rows(off.where(condition)) == where(everything, keep), name
        assert off.count() == len(everything)
    finally:
        spark.conf.set("spark.sql.python.filterPushdown.enabled", "true")


def test_pushed_scan_reuse_cannot_give_a_wrong_count(
    spark: SparkSession, log_cluster: PeerCluster
) -> None:
    """Issue #17: df.where(topic='audit').count() then df.count() on the same DataFrame
    returned the filtered count (Spark caches a pushed scan on the DataFrame's source). By
    default the source narrows nothing by pushed filters, so every count is right."""
    rows = log_rows(log_cluster)
    audit = sum(1 for r in rows if r[3] == "audit")
    df = load(spark, log_cluster, numPartitions=2)
    assert 0 < audit < len(rows)
    assert df.where(F.col("topic") == "audit").count() == audit
    assert df.count() == len(rows)  # the wrong answer was `audit`
    assert df.where(F.col("topic").isNull()).count() == sum(1 for r in rows if r[3] is None)
    assert df.count() == len(rows)


@pytest.mark.xfail(
    strict=True,
    reason="Spark 4.1-4.3 PythonScanBuilder.pushFilters caches the pushed scan (read function "
    "and partitions) on the DataFrame's source (ds.setReadInfo) and a later query on the same "
    "DataFrame that pushes no filter reuses it; why pushFilters is opt-in (README)",
)
def test_spark_reuses_a_pushed_scan_with_push_filters_opted_in(
    spark: SparkSession, log_cluster: PeerCluster
) -> None:
    df = load(spark, log_cluster, pushFilters="true")
    raw = df.where(F.col("topic").isNull()).count()
    assert df.count() > raw  # fails while Spark has the bug: df.count() == raw


def test_narrow_filters_plan_only_what_they_need(
    spark: SparkSession, log_cluster: PeerCluster
) -> None:
    def planned(condition: Column | None = None) -> int:
        df = load(spark, log_cluster, entriesPerPartition=5, pushFilters="true")  # one per query
        return (df if condition is None else df.where(condition)).rdd.getNumPartitions()

    full = planned()
    narrow = load(spark, log_cluster, entriesPerPartition=5, pushFilters="true").where(
        F.col("index").between(30, 44)
    )
    assert narrow.rdd.getNumPartitions() == 3  # 15 entries, 5 per partition
    plan = narrow._jdf.queryExecution().executedPlan().toString()
    assert " Filter (" not in plan
    # explain() shows what the source narrowed its reads by (issue #31)
    pushed = plan.split("PushedFilters: [", 1)[-1].split("]", 1)[0]
    assert "index" in pushed, plan
    assert planned(F.col("index").isin(3, 4, 90)) == 1
    assert planned(F.col("index") > 10**9) <= 1  # nothing to read
    assert load(spark, log_cluster, pushFilters="true").where(F.col("index") > 10**9).count() == 0
    times = sorted({r[7] for r in spark_rows(load(spark, log_cluster)) if r[7] is not None})
    late = dt.datetime.fromtimestamp(times[-1] / 1000, dt.UTC)
    assert planned(F.col("timestamp") >= F.lit(late)) < full / 4
    assert {r[3] for r in spark_rows(load(spark, log_cluster, topics="audit"))} == {"audit"}


def _fails(action: Any, *needles: str, within: float = 30.0) -> str:
    started = time.monotonic()
    with pytest.raises(Exception) as caught:  # Spark wraps the source's error
        action()
    elapsed = time.monotonic() - started
    message = str(caught.value)
    for needle in needles:
        assert needle in message, message
    assert elapsed < within, f"took {elapsed:.1f}s"
    return message


def test_bad_input_fails_at_planning_with_a_clear_error(
    spark: SparkSession, log_cluster: PeerCluster
) -> None:
    top = last_index(log_cluster)

    def read() -> Any:  # a fresh reader each time: DataFrameReader options accumulate
        return spark.read.format("raftlog")

    _fails(
        lambda: read().options(**source_options(log_cluster, startIndex=3)).load(),
        "unknown option 'startindex'",
        "did you mean startingIndex",
    )
    _fails(lambda: read().option("ident", "x").load(), "option peers is required")
    _fails(
        lambda: (
            read().options(**source_options(log_cluster, startingIndex=9, endingIndex=3)).load()
        ),
        "endingIndex 3 is below startingIndex 9",
    )
    port = free_ports(1)[0]
    _fails(
        lambda: read().options(peers=f"tcp://127.0.0.1:{port}", ident="x", timeout="1").load(),
        "raftlog source: the cluster did not answer",
        f"tcp://127.0.0.1:{port}: refused the connection",
    )
    _fails(
        lambda: (
            read().options(**source_options(log_cluster, timeout=1, ident="not-this-one")).load()
        ),
        "check the ident 'not-this-one'",
    )
    beyond = load(spark, log_cluster, startingIndex=top + 100)
    _fails(beyond.collect, f"startingIndex {top + 100} is beyond the commit index")
    below = load(spark, log_cluster, startingIndex=0)
    _fails(below.count, "startingIndex 0 is below the first available index 1")
    _fails(load(spark, log_cluster, endingIndex=top + 5).collect, "is beyond the commit index")
    _fails(load(spark, log_cluster, maxEntriesPerTrigger=5).collect, "applies to streams")
    _fails(
        lambda: read().schema("index long").options(**source_options(log_cluster)).load().collect(),
        "the schema is fixed",
    )
    # unknown topics: raftlog's UnknownTopic at load(), not 0 rows
    message = _fails(
        lambda: read().options(**source_options(log_cluster, topics="nosuchtopic")).load(),
        "UnknownTopic",
        "topic 'nosuchtopic' does not exist",
    )
    # errors start with raftlog's one-line message (no worker traceback before it)
    assert "Traceback" not in message, message
    assert "Traceback" not in _fails(
        lambda: read().options(**source_options(log_cluster, numPartitions=0)).load(),
        "numPartitions='0' is invalid",
    )


def test_every_peer_counts_records_for_the_planner(log_cluster: PeerCluster) -> None:
    """``TC`` on a live cluster: the leader's and the followers' counts equal the records
    of the log, bucket by bucket (what balances the partitions)."""
    rows = log_rows(log_cluster)
    top = last_index(log_cluster)
    per_entry = Counter(r[0] for r in rows if r[3] is not None)

    async def ask() -> list[Any]:
        async with RaftClient(log_cluster.urls, log_cluster.ident, timeout=10) as client:
            topics = TopicClient(client)
            try:
                leader = await topics.record_counts(1, top, step=5)
                peers = [await topics.record_counts(1, top, url=u) for u in log_cluster.urls]
                return [leader, *peers]
            finally:
                await topics.aclose()

    leader, *peers = asyncio.run(ask())
    expected = [sum(per_entry.get(i, 0) for i in range(lo, lo + 5)) for lo in range(1, top + 1, 5)]
    assert list(leader.records) == expected
    for counts in peers:
        upto = min(counts.applied, top)
        assert list(counts.records[:upto]) == [per_entry.get(i, 0) for i in range(1, upto + 1)]
    with LogClient(tuple(log_cluster.urls), log_cluster.ident, 5.0) as client:
        assert client.record_counts(1, top, 1, frozenset({"audit"})) is not None
