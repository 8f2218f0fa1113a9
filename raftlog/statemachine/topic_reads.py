"""The read side of the topic machine: records by topic from an id or a time, descriptions.

Kept apart from the apply side (``topics``) because reads touch only the index and the log
and must never change either. Every read starts at the highest of three floors -- where the
client asked to start, the oldest entry still in the log (compaction), and the oldest
record still inside its topic's retention -- each found by one seek, then walks the
topic's own keys only: unrelated entries are never read. Entries are read from the peer's
LogStore by index and decoded once per entry, whatever the number of its records asked for.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Final, Protocol

from raftlog.entry import ENTRY_HEADER_SIZE
from raftlog.records import LoggedRecord, RecordBatch, RecordFormatError, RecordId, decode_entry
from raftlog.rpc import topic_counts
from raftlog.rpc import topics as rpc
from raftlog.statemachine.topic_index import TopicIndex, TopicState

READ_BUDGET: Final = 4 * 1024 * 1024
"""Record bytes per read answer (at least one record is always sent)."""


class EntrySource(Protocol):
    """The part of the peer's LogStore the machine reads records from."""

    @property
    def first_index(self) -> int:
        """The first index readable as an entry."""
        ...

    @property
    def snapshot_index(self) -> int:
        """Last index covered by the installed snapshot."""
        ...

    @property
    def snapshot_term(self) -> int:
        """Term of ``snapshot_index``."""
        ...

    def raw_entries(self, lo: int, hi: int, max_bytes: int | None = None) -> list[bytes]:
        """Serialized entries ``[lo, hi)``, at most ``max_bytes`` (at least one)."""
        ...


def wall_ms() -> int:
    """The wall clock in milliseconds (append-time stamps and retention use wall time)."""
    return int(time.time() * 1000)


class TopicReader:
    """Answers ``TR``/``TD`` from the topic index and the log: records are read from the entries
    that hold them, so the index stays small."""

    def __init__(self, index: TopicIndex, entries: EntrySource, clock: Callable[[], int]) -> None:
        self._index = index
        self._entries = entries
        self._clock = clock

    def floor(self, state: TopicState, now_ms: int) -> RecordId | None:
        """The oldest record id still served (compaction and retention), or None when
        retention has expired every record: a record is visible while
        ``now < append time + retention_ms``."""
        floor = RecordId(self._entries.first_index, 0)
        retention = state.properties.retention_ms
        if retention is not None:
            first = self._index.first_index_at(max(0, now_ms - retention + 1))
            if first is None:
                return None
            floor = max(floor, RecordId(first, 0))
        return floor

    def _start(self, req: rpc.ReadRequest) -> RecordId | None:
        """Where the client asked to start (None: after everything there is)."""
        if req.from_time_ms is not None:
            first = self._index.first_index_at(req.from_time_ms + (0 if req.inclusive else 1))
            return None if first is None else RecordId(first, 0)
        if req.from_index is None:
            return RecordId(0, 0)
        index, pos = req.from_index, req.from_position
        if pos is None:
            return RecordId(index if req.inclusive else index + 1, 0)
        return RecordId(index, pos if req.inclusive else pos + 1)

    def read(
        self, state: TopicState, req: rpc.ReadRequest, applied: int, is_leader: bool
    ) -> rpc.ReadResult:
        """Records of one topic from the requested start, bounded by the limit and the response
        budget; retention's floor applies."""
        floor = self.floor(state, self._clock())
        start = self._start(req)
        out: list[LoggedRecord] = []
        more = False
        if floor is not None and start is not None:
            size = 0
            current: tuple[int, RecordBatch | None] = (-1, None)
            for rid, append_time in self._index.records(req.topic, max(start, floor)):
                if len(out) >= req.limit or size >= READ_BUDGET:
                    more = True
                    break
                if current[0] != rid.index:
                    current = (rid.index, self._batch_at(rid.index))
                batch = current[1]
                if batch is None or rid.position >= len(batch.records):
                    continue
                record = batch.records[rid.position]
                out.append(LoggedRecord(rid, append_time, record))
                size += record.size
        return rpc.ReadResult(tuple(out), applied, is_leader, more)

    def _batch_at(self, index: int) -> RecordBatch | None:
        try:
            raw = self._entries.raw_entries(index, index + 1)[0]
            entry = decode_entry(raw[ENTRY_HEADER_SIZE:])
        except (IndexError, RecordFormatError):
            return None  # compacted meanwhile, or not what the index says: skip, never fail
        return entry if isinstance(entry, RecordBatch) else None

    def counts(
        self, req: topic_counts.CountsRequest, states: dict[str, TopicState], applied: int
    ) -> topic_counts.CountsResult:
        """``TC``: records per index bucket from the index alone, under the same floors as
        :meth:`read` (compaction, each topic's retention) and never beyond ``applied``;
        ``states`` are the topics to count (the caller checked that they exist)."""
        buckets = req.buckets
        entries, records = [0] * buckets, [0] * buckets
        first = self._entries.first_index
        lo, hi = max(req.from_index, first), min(req.to_index, applied)
        if lo <= hi:
            for index in self._index.record_entries(lo, hi):
                entries[req.bucket_of(index)] += 1
            now = self._clock()
            for name, state in states.items():
                floor = self.floor(state, now)
                if floor is None:
                    continue
                for index, count in self._index.record_counts(name, max(lo, floor.index), hi):
                    records[req.bucket_of(index)] += count
        return topic_counts.CountsResult(applied, first, tuple(entries), tuple(records))

    def describe(self, name: str, state: TopicState) -> rpc.TopicInfo:
        """The topic's properties and the ids of its oldest and newest retained records."""
        floor = self.floor(state, self._clock())
        bounds = None if floor is None else self._index.record_bounds(name, floor)
        first, last = (None, None) if bounds is None else bounds
        return rpc.TopicInfo(
            name,
            state.properties,
            state.created_index,
            first,
            last,
            None if last is None else self._index.record_time(name, last),
        )
