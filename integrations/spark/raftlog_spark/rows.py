"""Entries to Arrow record batches, column by column (no per-row tuples).

For each STATE entry: raw data gives one row; a topic record batch (decoded with
``raftlog.topics.record_decode.decode_entry``) gives one row per admitted record; a
transaction commit (kind 04 ``commit``) gives one row per admitted record it made visible,
at ``(commit index, k)``, as the ``commits`` resolver (``raftlog_spark.commits``) fetches
them -- transactional stores (kind 05) and the other control entries give none (read
committed). Cheap checks come first, on the entry's bytes, so rejected entries are never
decoded: the entry type, the topic magic and kind, the append time in the header (time
filters), and whether the MessagePack encoding of some wanted topic name occurs in the entry
at all (topic filters).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Final

import msgpack
import pyarrow as pa
import pyarrow.compute as pc

from raftlog.client import IndexedEntry
from raftlog.entry import EntryType, LogEntry
from raftlog.topics.client_view import TopicView
from raftlog.topics.record_decode import decode_entry
from raftlog.topics.records import (
    HEADER_SIZE,
    KIND_RECORDS,
    LoggedRecord,
    Record,
    RecordBatch,
    RecordFormatError,
    is_topic_data,
)
from raftlog.topics.records_tx import KIND_TX, KIND_TX_STORE, TxControl, TxStore, decode_any_entry
from raftlog.topics.stamp import append_time_of
from raftlog_spark.columns import KIND_OFFSET, Columns, CommitRows, columns_of, record_columns
from raftlog_spark.filters import ScanSpec
from raftlog_spark.schema import arrow_schema

log = logging.getLogger("raftlog_spark")

MAX_BATCH_BYTES: Final = 32 * 1024 * 1024
STATE: Final = int(EntryType.STATE)


CommitRecords = Callable[[int, int], "CommitRows | Sequence[LoggedRecord]"]
"""The records commit ``index`` (appended at the given ms) made visible, already filtered by
the topic read rules: as columns (:mod:`raftlog_spark.commit_map`) or records (``TR``)."""
KeepStore = Callable[[int, bytes], None]
"""Called with each transactional store entry the rows pass (the commit resolver keeps the
ones its commits need: no second read)."""


class RowBuilder:
    """Accumulates rows of admitted entries; :meth:`flush` returns them as one batch."""

    def __init__(
        self,
        spec: ScanSpec,
        rows_per_batch: int,
        include_headers: bool = True,
        view: TopicView | None = None,
        *,
        commits: CommitRecords | None = None,
        uncommitted: bool = False,
        keep_store: KeepStore | None = None,
    ) -> None:
        self.rows_per_batch = rows_per_batch
        self._commits = commits  # None: no topic records wanted, commits give no rows
        self._keep_store = None if uncommitted else keep_store
        self._uncommitted = uncommitted
        """``isolation.level=read_uncommitted``: stores give their records, commits none."""
        self.include_headers = include_headers
        self._view = view  # the topic read rules (raftlog.topics.client_view), issue #11
        self._topic_ok = spec.topic_checker()
        self._raw_ok = spec.admits_raw
        self._time = spec.time if spec.time.constrained else None
        wanted = spec.wanted_topics()
        self._needles = (
            None if wanted is None else tuple(msgpack.packb(t, use_bin_type=True) for t in wanted)
        )
        self.malformed = 0
        self.decoded = 0
        self.skipped = 0
        self._reset()

    def _reset(self) -> None:
        self._rows = 0
        # index, term and append time are the same for all rows of an entry: one run each
        self._ends: list[int] = []  # rows up to and including each run
        self._index: list[int] = []
        self._term: list[int] = []
        self._time_us: list[int | None] = []
        # the topic: a run per single-topic entry, else a run per row
        self._topic_ends: list[int] = []
        self._topic: list[str | None] = []
        self._position: list[int] = []
        self._key: list[bytes | None] = []
        self._value: list[bytes] = []
        self._offsets: list[int] | None = None  # None: no row of the batch has headers yet
        self._hkeys: list[str] = []
        self._hvalues: list[bytes] = []
        self._producer_ms: list[int] = []
        self._bytes = 0

    @property
    def rows(self) -> int:
        return self._rows

    @property
    def full(self) -> bool:
        return self._rows >= self.rows_per_batch or self._bytes >= MAX_BATCH_BYTES

    def _run(self, index: int, term: int, time_us: int | None, count: int) -> None:
        """``count`` more rows of entry ``index`` (its term and append time)."""
        self._rows += count
        self._ends.append(self._rows)
        self._index.append(index)
        self._term.append(term)
        self._time_us.append(time_us)

    def _headers(self, headers: Sequence[Mapping[str, bytes]]) -> None:
        """The header maps of the rows just added (one per row)."""
        if not self.include_headers:
            return
        offsets, hkeys = self._offsets, self._hkeys
        if offsets is None:
            if not any(headers):
                return
            offsets = self._offsets = [0] * (self._rows - len(headers) + 1)
        for named in headers:
            if named:
                hkeys.extend(named.keys())
                self._hvalues.extend(named.values())
            offsets.append(len(hkeys))

    def add(self, index: int, entry: LogEntry) -> None:
        if entry.entry_type != STATE:
            return
        data = entry.data
        if not is_topic_data(data):
            if self._raw_ok:
                self._raw(index, entry.term, data)
            return
        kind = data[KIND_OFFSET] if len(data) > HEADER_SIZE else -1
        if kind == KIND_TX:
            if not self._uncommitted:
                self._add_commit(index, entry.term, data)
            return
        if kind == KIND_TX_STORE and self._keep_store is not None:
            self._keep_store(index, data)
        # read_uncommitted: a store's records are rows at the store, like a batch's
        store_rows = kind == KIND_TX_STORE and self._uncommitted and self._commits is not None
        if kind != KIND_RECORDS and not store_rows:
            return  # an admin command (or a malformed entry, skipped like the state machine)
        stamp = append_time_of(data)
        time_us = stamp * 1000 if stamp else None
        if self._time is not None and not self._time.admits(time_us):
            self.skipped += 1
            return
        needles = self._needles
        if needles is not None and not any(n in data for n in needles):
            self.skipped += 1
            return
        records: tuple[Record, ...] = ()
        # plain records (no TTL): no Record objects
        columns = record_columns(data) if kind == KIND_RECORDS else None
        if columns is None:  # not a plain batch: the canonical decoder
            try:
                batch = decode_entry(data) if kind == KIND_RECORDS else decode_any_entry(data)
            except RecordFormatError as exc:
                self.malformed += 1
                if self.malformed <= 3:
                    log.warning("raftlog_spark: skipping malformed topic entry %d: %s", index, exc)
                return
            if not isinstance(batch, RecordBatch | TxStore):
                return
            records = batch.records
            columns = columns_of(records)
        self.decoded += 1
        picked = self._picked(index, stamp, columns[0], records)
        if picked is None:
            self._columns(index, entry.term, time_us, columns, range(len(columns[0])))
        else:
            self._columns(
                index, entry.term, time_us, CommitRows.pick(columns, picked, 0).columns, picked
            )
        self._bytes += len(data)

    def _raw(self, index: int, term: int, data: bytes) -> None:
        """The row of a raw entry (``_run`` and ``_headers`` inlined: a log may hold
        mostly raw entries, one row each). A raw row continues the previous row's topic
        run when that is a raw row too (topic None)."""
        rows = self._rows = self._rows + 1
        self._ends.append(rows)
        self._index.append(index)
        self._term.append(term)
        self._time_us.append(None)
        topics, ends = self._topic, self._topic_ends
        if topics and topics[-1] is None and ends[-1] == rows - 1:
            ends[-1] = rows
        else:
            topics.append(None)
            ends.append(rows)
        self._position.append(0)
        self._key.append(None)
        self._value.append(data)
        if self._offsets is not None:  # (only with include_headers)
            self._offsets.append(len(self._hkeys))
        self._producer_ms.append(0)
        self._bytes += len(data)

    def _columns(
        self, index: int, term: int, time_us: int | None, columns: Columns, positions: Sequence[int]
    ) -> None:
        """Rows of entry ``index`` from ``columns``, at ``positions``: whole columns at a
        time, not one append per field and record."""
        topics, keys, values, headers, stamps = columns
        count = len(topics)
        if not count:
            return
        self._position.extend(positions)
        self._run(index, term, time_us, count)
        if count == 1 or len(set(topics)) == 1:
            self._topic.append(topics[0])
            self._topic_ends.append(self._rows)
        else:
            self._topic.extend(topics)
            self._topic_ends.extend(range(self._rows - count + 1, self._rows + 1))
        self._key.extend(keys)
        self._value.extend(values)
        self._producer_ms.extend(stamps)  # ms, 0 = none: converted per batch in flush
        self._headers(headers)

    def _add_commit(self, index: int, term: int, data: bytes) -> None:
        """The rows of a transaction commit: its records from the topic index, one per
        admitted record at ``(index, k)``; begin and rollback entries give none."""
        if self._commits is None:
            return
        stamp = append_time_of(data)
        if self._time is not None and not self._time.admits(stamp * 1000 if stamp else None):
            self.skipped += 1
            return
        try:
            control = decode_any_entry(data)
        except RecordFormatError:
            return  # the state machine skips it too: no commit happened
        if not isinstance(control, TxControl) or control.op != "commit":
            return
        got = self._commits(index, stamp)
        rows = got if isinstance(got, CommitRows) else CommitRows.of(got, stamp)
        columns, positions = rows.columns, rows.positions
        topic_ok = self._topic_ok
        if topic_ok is not None and not all(map(topic_ok, set(columns[0]))):
            picked = [k for k, t in enumerate(columns[0]) if topic_ok(t)]
            columns = CommitRows.pick(columns, picked, 0).columns
            positions = [positions[k] for k in picked]
        self.decoded += 1
        time_us = rows.append_ms * 1000 if rows.append_ms else None
        self._columns(index, term, time_us, columns, positions)
        self._bytes += sum(map(len, columns[2]))

    def _picked(
        self, index: int, stamp: int, topics: Sequence[str], records: tuple[Record, ...]
    ) -> list[int] | None:
        """Positions of the admitted records of an entry, or None for all of them.

        Plain records (``records`` empty: decoded as columns, no TTL) are checked once per
        distinct topic (:meth:`TopicView.first_admitted`); records from ``decode_entry`` may
        carry a TTL and are checked one by one (:meth:`TopicView.admits`)."""
        topic_ok, view = self._topic_ok, self._view
        if topic_ok is None and view is None:
            return None
        if records and view is not None:
            return [
                p
                for p, record in enumerate(records)
                if (topic_ok is None or topic_ok(record.topic))
                and view.admits(index, p, stamp, record)
            ]
        first: dict[str, int | None] = {}
        for topic in set(topics):
            ok = topic_ok is None or topic_ok(topic)
            first[topic] = (view.first_admitted(topic, index) if view else 0) if ok else None
        if all(f == 0 for f in first.values()):
            return None
        picked = []
        for p, topic in enumerate(topics):
            f = first[topic]
            if f is not None and p >= f:
                picked.append(p)
        return picked

    def flush(self) -> pa.RecordBatch:
        schema = arrow_schema(self.include_headers)
        time_type = schema.field("timestamp").type
        ends = pa.array(self._ends, pa.int32())
        columns = [
            _decoded_runs(ends, pa.array(self._index, pa.int64())),
            pa.array(self._position, pa.int32()),
            _decoded_runs(ends, pa.array(self._term, pa.int64())),
            _decoded_runs(
                pa.array(self._topic_ends, pa.int32()), pa.array(self._topic, pa.string())
            ),
            pa.array(self._key, pa.binary()),
            pa.array(self._value, pa.binary()),
            _decoded_runs(ends, pa.array(self._time_us, time_type)),
            _ms_or_null(self._producer_ms, time_type),
        ]
        if self.include_headers:
            headers = pa.MapArray.from_arrays(
                _header_offsets(self._offsets, self._rows),
                pa.array(self._hkeys, pa.string()),
                pa.array(self._hvalues, pa.binary()),
                type=schema.field("headers").type,
            )
            columns.insert(6, headers)
        batch = pa.RecordBatch.from_arrays(columns, schema=schema)
        self._reset()
        return batch


def _header_offsets(offsets: list[int] | None, rows: int) -> pa.Array:
    """The map offsets of a batch's headers; None (no row has headers, the usual case):
    ``rows + 1`` zeros straight from a zeroed buffer, not from a list of Python ints."""
    if offsets is not None:
        return pa.array(offsets, pa.int32())
    return pa.Array.from_buffers(pa.int32(), rows + 1, [None, pa.py_buffer(bytes(4 * (rows + 1)))])


def _decoded_runs(ends: pa.Array, values: pa.Array) -> pa.Array:
    """The plain array of run-length encoded ``values`` (run ``k`` ends before row
    ``ends[k]``): a value per entry is expanded to its rows in Arrow, not in Python."""
    return pc.run_end_decode(pa.RunEndEncodedArray.from_arrays(ends, values))


def _ms_or_null(stamps: list[int], time_type: pa.DataType) -> pa.Array:
    """Times in ms (0: none) as a timestamp array, null for 0 -- vectorised, not per row."""
    ms = pa.array(stamps, pa.int64())
    micros = pc.multiply(ms, 1000).cast(time_type)
    return pc.if_else(pc.equal(ms, 0), pa.scalar(None, time_type), micros)


def to_batches(
    chunks: Iterable[list[IndexedEntry]],
    spec: ScanSpec,
    rows_per_batch: int,
    include_headers: bool = True,
    view: TopicView | None = None,
    *,
    commits: CommitRecords | None = None,
    uncommitted: bool = False,
    keep_store: KeepStore | None = None,
) -> Iterator[pa.RecordBatch]:
    """Record batches of the rows of ``chunks`` (never an empty batch); with ``view``, topic
    records are the ones a ``TR`` read returns (incarnation, retention, TTL); ``commits``
    resolves the records of transaction commits (None: commits give no rows);
    ``uncommitted`` (``isolation.level=read_uncommitted``): transactional stores give their
    records at the store instead, and commits none."""
    builder = RowBuilder(
        spec,
        rows_per_batch,
        include_headers,
        view,
        commits=commits,
        uncommitted=uncommitted,
        keep_store=keep_store,
    )
    for chunk in chunks:
        for item in chunk:
            builder.add(item.index, item.entry)
            if builder.full:
                yield builder.flush()
    if builder.rows:
        yield builder.flush()
