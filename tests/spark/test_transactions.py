"""The Spark source across transactions (issue #18): read committed, at the commit's position.

One cluster holds plain records and five transactions: one committed whose stores span two
topics and lie far (more than a partition's worth of entries) from its commit, one rolled
back, one timed out, one still open, and one committed after the planned end of a stream's
first run. Committed records must show exactly once, as ``(commit index, k)`` with the
fields every ``TR`` read gives them (the reference: the peers' own topic reads, not code the
source shares); the others never.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from integration.cluster import PeerCluster
from pyspark.sql import DataFrame, SparkSession
from raftlog_spark.logclient import LogClient

from raftlog.topics import SyncTopicClient
from raftlog.topics.records import Record, RecordId

from .conftest import source_options
from .helpers import Row, last_index, spark_rows, start_cluster, stop_cluster

pytestmark = pytest.mark.timeout(240)

TOPICS = ("tx", "tx2")
FILLER = 40
"""Plain entries between a transaction's stores and its commit: with entriesPerPartition
below it, the stores and the commit are read by different tasks."""
HIDDEN = (b"rolled-1", b"open-1", b"expired-1")


@dataclass
class TxLog:
    cluster: PeerCluster
    commit: int
    first: int


def _publish_filler(topics: SyncTopicClient, n: int) -> None:
    for i in range(n):
        topics.publish("tx", f"filler-{i}".encode())


def _wait_expired(topics: SyncTopicClient, txid: str) -> None:
    deadline = time.monotonic() + 30
    while topics.transaction_status(txid).state != "expired":
        assert time.monotonic() < deadline, "the transaction did not time out"
        time.sleep(0.2)


@pytest.fixture(scope="module")
def tx_log(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TxLog]:
    cluster = start_cluster(Path(tmp_path_factory.mktemp("spark-tx")), "raftlog-spark-tx")
    try:
        with SyncTopicClient(cluster.urls, cluster.ident, timeout=30) as topics:
            for name in TOPICS:
                topics.create_topic(name)
            first = last_index(cluster) + 1
            topics.publish("tx", b"plain-1")
            rolled = topics.begin_transaction(timeout=300)
            kept = topics.begin_transaction(timeout=300)
            still_open = topics.begin_transaction(timeout=300)
            expiring = topics.begin_transaction(timeout=1)
            rolled.store("tx", [b"rolled-1"])
            expiring.store("tx2", [b"expired-1"])
            kept.store(
                None,
                [
                    Record("tx", b"committed-1", key=b"k1", headers={"h": b"v"}, timestamp_ms=7),
                    Record("tx2", b"other-1", key=b"k2"),
                ],
            )
            _publish_filler(topics, FILLER)
            kept.store("tx", [b"committed-2"])
            still_open.store("tx", [b"open-1"])
            rolled.rollback()
            _wait_expired(topics, expiring.id)
            commit = kept.commit()
            topics.publish("tx", b"plain-2")
        yield TxLog(cluster, commit, first)
    finally:
        stop_cluster(cluster)


def _tr_rows(cluster: PeerCluster, names: tuple[str, ...], first: int) -> list[Row]:
    """Every record of ``names`` from index ``first`` as the peers' ``TR`` reads give them,
    as Spark rows without the term: the reference."""
    rows: list[Row] = []
    with SyncTopicClient(cluster.urls, cluster.ident, timeout=30) as topics:
        for name in names:
            result = topics.read(name, from_index=first, limit=10_000)
            assert not result.more
            for item in result.records:
                r = item.record
                rows.append(
                    (
                        item.id.index,
                        item.id.position,
                        r.topic,
                        r.key,
                        r.value,
                        dict(r.headers),
                        item.append_time_ms,
                        r.timestamp_ms or None,
                    )
                )
    return sorted(rows, key=lambda row: (row[0], row[1]))


def _without_term(rows: list[Row]) -> list[Row]:
    return [row[:2] + row[3:] for row in rows]


def _read(spark: SparkSession, log: TxLog, **extra: Any) -> list[Row]:
    options = source_options(log.cluster, startingIndex=log.first, **extra)
    return spark_rows(spark.read.format("raftlog").options(**options).load())


def test_committed_records_show_at_the_commit_position(spark: SparkSession, tx_log: TxLog) -> None:
    rows = _read(spark, tx_log, topics="tx")
    at_commit = [(r[0], r[1], r[5]) for r in rows if r[0] == tx_log.commit]
    c = tx_log.commit
    assert at_commit == [(c, 0, b"committed-1"), (c, 2, b"committed-2")]
    values = [r[5] for r in rows]
    assert values[0] == b"plain-1" and values[-1] == b"plain-2"
    assert not set(HIDDEN) & set(values)
    assert _without_term(rows) == _tr_rows(tx_log.cluster, ("tx",), tx_log.first)


def test_stores_and_commit_in_different_partitions_all_topics(
    spark: SparkSession, tx_log: TxLog
) -> None:
    rows = _read(spark, tx_log, entriesPerPartition=FILLER // 4)
    assert _without_term(rows) == _tr_rows(tx_log.cluster, TOPICS, tx_log.first)
    at_commit = [r for r in rows if r[0] == tx_log.commit]
    assert [(r[1], r[3], r[4], r[5], r[6]) for r in at_commit] == [
        (0, "tx", b"k1", b"committed-1", {"h": b"v"}),
        (1, "tx2", b"k2", b"other-1", {}),
        (2, "tx", None, b"committed-2", {}),
    ]
    # producer timestamps are the records' own; the append time is the commit's, for all
    assert [r[8] for r in at_commit[:2]] == [7, None]
    assert len({r[7] for r in at_commit}) == 1
    assert len({(r[0], r[1]) for r in rows}) == len(rows)
    assert not set(HIDDEN) & {r[5] for r in rows}


def test_planner_counts_weigh_the_commit_not_the_stores(tx_log: TxLog) -> None:
    """``TC`` (what partitions are balanced by) counts a commit's records at the commit."""
    cluster, c = tx_log.cluster, tx_log.commit
    with LogClient(tuple(cluster.urls), cluster.ident, 30.0) as client:
        everything = client.record_counts(tx_log.first, c, c - tx_log.first + 1, None)
        at_commit = client.record_counts(c, c, 1, frozenset(TOPICS))
        of_tx2 = client.record_counts(c, c, 1, frozenset({"tx2"}))
    assert everything is not None and at_commit is not None and of_tx2 is not None
    assert at_commit.records == (3,) and of_tx2.records == (1,)
    assert everything.records == (1 + FILLER + 3,)  # plain-1, filler, the commit's three


def test_topic_filter_keeps_the_commit_positions(spark: SparkSession, tx_log: TxLog) -> None:
    rows = _read(spark, tx_log, topics="tx2", numPartitions=3)
    assert [(r[0], r[1], r[5]) for r in rows] == [(tx_log.commit, 1, b"other-1")]
    pattern = _read(spark, tx_log, topicPattern="tx.*", recordsPerPartition=5)
    assert _without_term(pattern) == _tr_rows(tx_log.cluster, TOPICS, tx_log.first)


def test_stream_across_a_commit(spark: SparkSession, tx_log: TxLog, tmp_path: Path) -> None:
    """Micro-batches of a few entries each, a run before and after a further commit: every
    committed record once, in its commit's batch; nothing uncommitted."""
    got: list[Row] = []

    def sink(batch: DataFrame, _batch_id: int) -> None:
        got.extend(spark_rows(batch))

    def run() -> None:
        options = source_options(
            tx_log.cluster, startingOffsets=tx_log.first, maxEntriesPerTrigger=7
        )
        query = (
            spark.readStream.format("raftlog")
            .options(**options)
            .load()
            .writeStream.foreachBatch(sink)
            .option("checkpointLocation", str(tmp_path / "checkpoint"))
            .trigger(availableNow=True)
            .start()
        )
        try:
            assert query.awaitTermination(180), "the availableNow query did not finish"
        finally:
            query.stop()

    run()
    with SyncTopicClient(tx_log.cluster.urls, tx_log.cluster.ident, timeout=30) as topics:
        later = topics.begin_transaction(timeout=300)
        later.store("tx2", [b"later-1", b"later-2"])
        topics.publish("tx", b"plain-3")
        later_commit = later.commit()
    run()
    rows = sorted(got, key=lambda row: (row[0], row[1]))
    topic_rows = [r for r in rows if r[3] is not None]
    assert _without_term(topic_rows) == _tr_rows(tx_log.cluster, TOPICS, tx_log.first)
    assert [(r[1], r[5]) for r in rows if r[0] == later_commit] == [
        (0, b"later-1"),
        (1, b"later-2"),
    ]
    assert len({(r[0], r[1]) for r in rows}) == len(rows)
    assert not set(HIDDEN) & {r[5] for r in rows}


def test_a_task_resolves_its_commits_from_the_plan_without_topic_reads(
    tx_log: TxLog, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue #31: planning ships each partition its commits and their stores (one ``TC``
    answer); a task reads the stores from the log, never a ``TR`` round trip per commit."""
    from raftlog_spark import commits as tr_commits  # noqa: PLC0415
    from raftlog_spark.options import parse_options  # noqa: PLC0415
    from raftlog_spark.scan import base_spec, read_partition, weighted_split  # noqa: PLC0415

    def no_topic_reads(*_: Any) -> Any:
        raise AssertionError("a commit was resolved by TR reads")

    opts = parse_options(source_options(tx_log.cluster, entriesPerPartition=FILLER // 4))
    spec = base_spec(opts)
    cluster = tx_log.cluster
    with LogClient(tuple(cluster.urls), cluster.ident, 30.0) as client:
        last = client.log_info().commit_index
        parts = weighted_split(client, opts, spec, ((tx_log.first, last),))
    assert sum(len(p.commits.commits) for p in parts if p.commits) >= 2  # kept + later ones
    monkeypatch.setattr(tr_commits.CommitReader, "records", no_topic_reads)
    rows = [
        row
        for part in parts
        for batch in read_partition(opts, spec, part)
        for row in zip(
            *(batch.column(c).to_pylist() for c in ("index", "position", "topic", "value")),
            strict=True,
        )
    ]
    c = tx_log.commit
    assert [(r[0], r[1], r[3]) for r in rows if r[0] == c] == [
        (c, 0, b"committed-1"),
        (c, 1, b"other-1"),
        (c, 2, b"committed-2"),
    ]
    expected = [(r[0], r[1], r[2], r[4]) for r in _tr_rows(cluster, TOPICS, tx_log.first)]
    assert sorted(r for r in rows if r[2] is not None) == [r for r in expected if r[0] <= last]


def test_read_uncommitted_shows_every_stored_record_at_its_store(
    spark: SparkSession, tx_log: TxLog
) -> None:
    """``isolation.level=read_uncommitted`` (issue #31): stored records of open, rolled-back
    and timed-out transactions too, each once at its store entry; commits give no rows."""
    rows = _read(spark, tx_log, **{"kafka.isolation.level": "read_uncommitted", "topics": "tx"})
    values = [r[5] for r in rows]
    assert {b"rolled-1", b"open-1", b"committed-1", b"committed-2"} <= set(values)
    assert b"expired-1" not in values  # topic tx2, not read
    assert not [r for r in rows if r[0] == tx_log.commit]
    assert len({(r[0], r[1]) for r in rows}) == len(rows)
    committed = _read(spark, tx_log, topics="tx")
    assert len(rows) == len(committed) + 2  # rolled-1 and open-1 besides the same records


def test_assign_and_min_partitions(spark: SparkSession, tx_log: TxLog) -> None:
    """Kafka's ``assign`` (partition 0 of a topic) reads what ``topics`` reads;
    ``minPartitions`` is a floor on the tasks."""
    options = source_options(
        tx_log.cluster, startingIndex=tx_log.first, assign='{"tx2": [0]}', minPartitions=3
    )
    df = spark.read.format("raftlog").options(**options).load()
    assert df.rdd.getNumPartitions() >= 3
    assert spark_rows(df) == _read(spark, tx_log, topics="tx2")


def test_a_stream_group_keeps_the_position_across_queries(
    spark: SparkSession, tx_log: TxLog, tmp_path: Path
) -> None:
    """``groupId`` (issue #31): each micro-batch commits the group's position; a new query
    (no checkpoint) with the same group starts there, not at ``startingOffsets``."""
    got: list[Row] = []

    def sink(batch: DataFrame, _batch_id: int) -> None:
        got.extend(spark_rows(batch))

    def run(checkpoint: str) -> None:
        options = source_options(
            tx_log.cluster,
            startingOffsets="earliest",
            topics="tx",
            **{"kafka.group.id": "spark-g", "maxEntriesPerTrigger": 20},
        )
        query = (
            spark.readStream.format("raftlog")
            .options(**options)
            .load()
            .writeStream.foreachBatch(sink)
            .option("checkpointLocation", str(tmp_path / checkpoint))
            .trigger(availableNow=True)
            .start()
        )
        try:
            assert query.awaitTermination(180), "the availableNow query did not finish"
        finally:
            query.stop()

    run("first")
    first = list(got)
    assert first and {r[3] for r in first} == {"tx"}
    with SyncTopicClient(tx_log.cluster.urls, tx_log.cluster.ident, timeout=30) as topics:
        position = topics.group_positions("spark-g")["tx"]
        top = last_index(tx_log.cluster)
        # past every row read; the group's own commits (log entries too) came after the run
        assert max(r[0] for r in first) < position.next_record.index <= top
        assert position.next_record.position == 0
        assert position.metadata == "raftlog-spark"
        later = topics.publish("tx", b"after-the-group")
    got.clear()
    run("second")  # a new query: starts at the group's position, not at earliest
    assert [(r[0], r[5]) for r in got] == [(later.index, b"after-the-group")]


def test_a_batch_read_starts_at_the_group_position_and_commits_nothing(
    spark: SparkSession, tx_log: TxLog
) -> None:
    """``groupId`` on a batch read (issue #31): the read starts at the stream group's
    position, pinned at ``load()``, and leaves it where it was -- a batch read commits
    nothing, like the Kafka source's; an unknown group leaves the starting options in
    charge and is not created; a queue group is refused with one line."""
    cluster = tx_log.cluster
    rows = _read(spark, tx_log, topics="tx")
    middle = rows[len(rows) // 2][0]
    assert rows[0][0] < middle
    with SyncTopicClient(cluster.urls, cluster.ident, timeout=30) as topics:
        topics.create_group("spark-batch", mode="stream", topics=["tx"])
        topics.commit_group_position("spark-batch", "tx", RecordId(middle, 0))
        options = source_options(cluster, topics="tx", **{"kafka.group.id": "spark-batch"})
        df = spark.read.format("raftlog").options(**options).load()
        topics.commit_group_position("spark-batch", "tx", RecordId(middle + 1, 0))
        assert spark_rows(df) == [r for r in rows if r[0] >= middle]  # pinned at load()
        assert topics.group_positions("spark-batch")["tx"].next_record == RecordId(middle + 1, 0)
        unknown = _read(spark, tx_log, topics="tx", groupId="spark-no-such-group")
        assert unknown == rows
        assert "spark-no-such-group" not in topics.list_groups()
        topics.create_group("spark-queue", mode="queue", topics=["tx"])
    queue = source_options(cluster, topics="tx", groupId="spark-queue")
    with pytest.raises(Exception, match="group 'spark-queue' is a queue group"):
        spark.read.format("raftlog").options(**queue).load().count()
