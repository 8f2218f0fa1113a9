"""Transaction entries in the Spark source's rows, without a cluster (issue #18): a commit's
rows come from the commit resolver at ``(commit index, k)``; stores, begins and rollbacks give
none; the resolver pages ``TR`` reads and applies the read's pinned view."""

from __future__ import annotations

import datetime as dt
from typing import Any, cast

import pyarrow as pa
from pyspark.sql.datasource import EqualTo, GreaterThan
from raftlog_spark.commits import CommitReader
from raftlog_spark.filters import ScanSpec, push_filters
from raftlog_spark.logclient import LogClient
from raftlog_spark.rows import to_batches
from raftlog_spark.schema import arrow_schema

from raftlog.client import IndexedEntry
from raftlog.entry import EntryType, LogEntry
from raftlog.errors import RecordsExpiredError, TopicError
from raftlog.topics.client_view import TopicBounds, TopicView
from raftlog.topics.records import LoggedRecord, Record, RecordId, encode_records
from raftlog.topics.records_tx import TxControl, encode_tx_control, encode_tx_store
from raftlog.topics.stamp import stamp_append_time
from raftlog.topics.wire import ReadResult

COMMIT_MS = 1_800_000_000_000


def _entry(data: bytes) -> LogEntry:
    return LogEntry(bytes(12), EntryType.STATE, 3, data)


def _log() -> list[tuple[int, LogEntry]]:
    stored = [Record("a", b"a0", b"k", {"h": b"1"}, 5), Record("b", b"b1")]
    return [
        (1, _entry(stamp_append_time(encode_tx_control(TxControl("begin", "t1", 5000)), 1))),
        (2, _entry(stamp_append_time(encode_tx_store("t1", stored), 2))),
        (3, _entry(stamp_append_time(encode_records([Record("a", b"plain")]), 3))),
        (4, _entry(stamp_append_time(encode_tx_control(TxControl("rollback", "t2")), 4))),
        (5, _entry(stamp_append_time(encode_tx_control(TxControl("commit", "t1")), COMMIT_MS))),
    ]


def _resolver(asked: list[int]) -> Any:
    def records(index: int, stamp: int = 0) -> list[LoggedRecord]:
        asked.append(index)
        return [
            LoggedRecord(RecordId(index, 0), COMMIT_MS, Record("a", b"a0", b"k", {"h": b"1"}, 5)),
            LoggedRecord(RecordId(index, 1), COMMIT_MS, Record("b", b"b1")),
        ]

    return records


def _table(spec: ScanSpec, asked: list[int]) -> pa.Table:
    chunks = [[IndexedEntry(i, e) for i, e in _log()]]
    batches = list(to_batches(chunks, spec, 2, commits=_resolver(asked)))
    return pa.Table.from_batches(batches, schema=arrow_schema())


def test_commit_rows_at_the_commit_position_and_nothing_else_of_the_transaction() -> None:
    asked: list[int] = []
    table = _table(ScanSpec(), asked)
    assert asked == [5]  # only the commit is resolved; stores, begin, rollback are not rows
    rows = list(
        zip(*(table.column(c).to_pylist() for c in ("index", "position", "topic")), strict=True)
    )
    assert rows == [(3, 0, "a"), (5, 0, "a"), (5, 1, "b")]
    assert table.column("value").to_pylist() == [b"plain", b"a0", b"b1"]
    assert table.column("key").to_pylist()[1:] == [b"k", None]
    assert table.column("headers").to_pylist()[1:] == [[("h", b"1")], []]
    assert table.column("term").to_pylist() == [3, 3, 3]
    stamp = dt.datetime.fromtimestamp(COMMIT_MS / 1000, dt.UTC)
    assert table.column("timestamp").to_pylist()[1:] == [stamp, stamp]
    producer = table.column("producer_timestamp").to_pylist()[1:]
    assert producer == [dt.datetime.fromtimestamp(0.005, dt.UTC), None]


def test_topic_and_time_filters_apply_to_commit_rows() -> None:
    spec, _ = push_filters(ScanSpec(), [EqualTo(("topic",), "b")])
    table = _table(spec, [])
    assert table.column("index").to_pylist() == [5]
    assert table.column("position").to_pylist() == [1]  # k as the topic reads give it
    late, _ = push_filters(
        ScanSpec(), [GreaterThan(("timestamp",), dt.datetime.fromtimestamp(1, dt.UTC))]
    )
    assert _table(late, []).column("index").to_pylist() == [5, 5]
    asked: list[int] = []
    early, _ = push_filters(
        ScanSpec(),
        [GreaterThan(("timestamp",), dt.datetime.fromtimestamp(COMMIT_MS / 1000, dt.UTC))],
    )
    assert _table(early, asked).num_rows == 0 and asked == []  # never fetched


def test_no_resolver_no_commit_rows() -> None:
    chunks = [[IndexedEntry(i, e) for i, e in _log()]]
    table = pa.Table.from_batches(list(to_batches(chunks, ScanSpec(), 10)))
    assert table.column("index").to_pylist() == [3]


class FakeTopics:
    """``TR`` answers from a list of records per topic, paged by ``limit``."""

    def __init__(self, records: dict[str, list[LoggedRecord]], expired: dict[str, RecordId]):
        self.records = records
        self.expired = expired
        self.calls: list[tuple[str, int, int]] = []

    def read(self, topic: str, *, from_index: int, from_position: int, limit: int) -> ReadResult:
        self.calls.append((topic, from_index, from_position))
        if topic not in self.records:
            raise TopicError("UnknownTopic", topic)
        low = self.expired.get(topic)
        start = RecordId(from_index, from_position)
        if low is not None and start < low:
            raise RecordsExpiredError("expired", (low.index, low.position))
        after = [r for r in self.records[topic] if r.id >= start]
        return ReadResult(tuple(after[:limit]), 100, True, len(after) > limit)


class FakeClient:
    timeout = 5.0

    def __init__(self, topics: FakeTopics) -> None:
        self.topics = topics

    def call(self, answer: Any) -> Any:
        return answer


def _logged(index: int, position: int, topic: str, ttl: int | None = None) -> LoggedRecord:
    return LoggedRecord(
        RecordId(index, position), 1000, Record(topic, b"%d" % position, ttl_ms=ttl)
    )


def test_commit_reader_pages_stops_at_the_commit_and_applies_the_view(
    monkeypatch: Any,
) -> None:
    import raftlog_spark.commits as commits  # noqa: PLC0415

    monkeypatch.setattr(commits, "READ_LIMIT", 2)
    many = [_logged(7, k, "a") for k in (0, 2, 3, 5, 6)] + [_logged(9, 0, "a")]
    fake = FakeTopics(
        {
            "a": many,
            "b": [_logged(7, 1, "b"), _logged(7, 4, "b", ttl=1)],  # 7:4's TTL ran out
            "c": [_logged(7, 7, "c"), _logged(7, 8, "c")],
        },
        {"c": RecordId(7, 8)},  # retention removed 7:7 of c
    )
    view = TopicView(
        {
            "a": TopicBounds(1, RecordId(0, 0), 1500),
            "b": TopicBounds(1, RecordId(0, 0), 1500),
            "c": TopicBounds(1, RecordId(7, 8), 1500),
            "gone": TopicBounds(1, RecordId(0, 0), 1500),  # deleted since planning
            "late": TopicBounds(8, RecordId(0, 0), 1500),  # created after the commit
        },
        9,
    )
    reader = CommitReader(cast(LogClient, FakeClient(fake)), view)
    got = [(r.id.position, r.record.topic) for r in reader.records(7)]
    assert got == [(0, "a"), (1, "b"), (2, "a"), (3, "a"), (5, "a"), (6, "a"), (8, "c")]
    assert ("late", 7, 0) not in fake.calls
    assert [c for c in fake.calls if c[0] == "a"] == [("a", 7, 0), ("a", 7, 3), ("a", 7, 6)]
    only_b = CommitReader(cast(LogClient, FakeClient(fake)), view, lambda t: t == "b")
    fake.calls.clear()
    assert [(r.id.position, r.record.topic) for r in only_b.records(7)] == [(1, "b")]
    assert fake.calls == [("b", 7, 0)]  # no round trip for topics the read does not want


def test_read_uncommitted_shows_stores_at_their_index_and_commits_give_none() -> None:
    """``isolation.level=read_uncommitted`` (issue #31): a store's records are rows at the
    store entry, whatever becomes of the transaction; the commit gives no rows."""
    asked: list[int] = []
    chunks = [[IndexedEntry(i, e) for i, e in _log()]]
    batches = to_batches(chunks, ScanSpec(), 10, commits=_resolver(asked), uncommitted=True)
    table = pa.Table.from_batches(list(batches), schema=arrow_schema())
    rows = list(
        zip(
            *(table.column(c).to_pylist() for c in ("index", "position", "topic", "value")),
            strict=True,
        )
    )
    assert rows == [(2, 0, "a", b"a0"), (2, 1, "b", b"b1"), (3, 0, "a", b"plain")]
    assert asked == []
    assert table.column("key").to_pylist()[0] == b"k"
    only_b, _ = push_filters(ScanSpec(), [EqualTo(("topic",), "b")])
    table = pa.Table.from_batches(
        list(to_batches(chunks, only_b, 10, commits=_resolver([]), uncommitted=True))
    )
    assert table.column("value").to_pylist() == [b"b1"]


class FakeLog:
    """``stream_range`` over a dict of entries, recording what was asked."""

    def __init__(self, entries: dict[int, LogEntry]) -> None:
        self.entries = entries
        self.streamed: list[tuple[int, int]] = []

    def stream_range(self, lo: int, hi: int, **_: Any) -> Any:
        self.streamed.append((lo, hi))
        yield [IndexedEntry(i, e) for i, e in sorted(self.entries.items()) if lo <= i <= hi]


def test_bulk_commits_build_rows_from_stores_the_task_passed_and_stream_only_the_others() -> None:
    """Issue #31: a store inside the task's ranges is taken as the stream passes it (never
    read twice); one outside is streamed once; a record whose TTL ran out by the view's log
    clock is dropped; a commit whose store is gone (compacted) falls back to ``TR``."""
    from raftlog_spark.commit_map import BulkCommits, CommitMap  # noqa: PLC0415

    def stamped(data: bytes, ms: int = 100) -> LogEntry:
        return _entry(stamp_append_time(data, ms))

    outside = {1: stamped(encode_tx_store("t2", [Record("c", b"c0")]))}
    inside = {
        2: stamped(
            encode_tx_store("t1", [Record("a", b"a0", b"k", {"h": b"1"}, 5), Record("b", b"b1")])
        ),
        3: stamped(encode_records([Record("a", b"plain")])),
        5: stamped(encode_tx_control(TxControl("commit", "t1"))),
        6: stamped(encode_tx_store("t2", [Record("c", b"old", ttl_ms=1), Record("a", b"a1")])),
        8: stamped(encode_tx_control(TxControl("commit", "t2"))),
        9: stamped(encode_tx_control(TxControl("commit", "t3"))),  # its store 4 is gone
    }
    log = FakeLog({**outside, **inside})
    view = TopicView({t: TopicBounds(1, RecordId(0, 0), 1500) for t in "abc"}, 9)
    fallen: list[int] = []

    def fallback(index: int) -> list[LoggedRecord]:
        fallen.append(index)
        return [LoggedRecord(RecordId(index, 0), 100, Record("a", b"from-TR"))]

    stores = ((5, ((2, 2),)), (8, ((1, 1), (6, 2))), (9, ((4, 1),)))
    bulk = BulkCommits(
        cast(LogClient, log), view, None, CommitMap(stores, 1, 9), fallback, ranges=((2, 9),)
    )
    chunks = [[IndexedEntry(i, e) for i, e in sorted(inside.items())]]
    batches = to_batches(
        chunks, ScanSpec(), 100, view=view, commits=bulk.records, keep_store=bulk.keep
    )
    table = pa.Table.from_batches(list(batches), schema=arrow_schema())
    rows = list(
        zip(
            *(table.column(c).to_pylist() for c in ("index", "position", "topic", "value")),
            strict=True,
        )
    )
    assert rows == [
        (3, 0, "a", b"plain"),
        (5, 0, "a", b"a0"),
        (5, 1, "b", b"b1"),
        (8, 0, "c", b"c0"),  # the store before the ranges, k = 0
        (8, 2, "a", b"a1"),  # k = 1 expired by its TTL
        (9, 0, "a", b"from-TR"),
    ]
    assert table.column("headers").to_pylist()[1] == [("h", b"1")]
    assert log.streamed == [(1, 1), (4, 4)]  # store 4 asked once (gone), 2 and 6 never
    assert fallen == [9] and bulk.fallbacks == 1
