"""Which records of a topic are retained, and the entries that hold them: the rules every
way of reading a topic shares (``TR`` reads, ``TD`` describe, the compaction limit, the
group deliveries), so they cannot disagree.

Why a module of its own: the rules are the part of the read side that the compaction limit
and retention's timer use without reading anything for a client; ``raftlog.topics.reads``
builds the answers on top of them (``TopicReader`` is a ``RetainedRecords``).

* only the topic's current incarnation: records before its ``created_index`` belong to a
  deleted topic of the same name and are gone;
* retention is a function of the log alone, never of a peer's clock: the *log clock* is the
  effective append time of the last applied stamped topic entry (the leader stamps every
  topic entry and, on an idle cluster, appends clock ticks), so every peer at the same
  applied index hides exactly the same records:

  - time: a record is retained while ``append time + retention_ms > log clock``;
  - size: while the bytes published to the topic from it on (itself included) are at most
    ``max_bytes`` -- the oldest go first;
  - per-record TTL: while ``append time + ttl_ms > log clock``;
  - time and size retention remove a prefix of the topic; the low-water mark (the position
    after the last record they removed) never moves back, so raising a limit later does
    not resurrect anything;

* refused batches were never indexed, so nobody sees them.

Records are read from the peer's LogStore by index and decoded once per entry (the
entries read last are kept decoded: ``raftlog.topics.decoded_entries``). The log is
never compacted past a retained record (``first_retained``), so a retained record's entry
is always there.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Final, Protocol

from raftlog.entry import ENTRY_HEADER_SIZE
from raftlog.topics.commit import CommitRecords
from raftlog.topics.compacted import CompactedStore
from raftlog.topics.decoded_entries import DecodedEntries
from raftlog.topics.index import TopicIndex, u64
from raftlog.topics.records import (
    LoggedRecord,
    Record,
    RecordBatch,
    RecordFormatError,
    RecordId,
    SkipBudget,
)
from raftlog.topics.records_tx import TxControl, TxStore, decode_any_entry
from raftlog.topics.state import TopicState

FIRST_RETAINED_SCAN: Final = 10_000
"""Records looked at, at most, to find a topic's first retained record past expired TTLs
(beyond it the scan position itself is used: conservative for compaction)."""


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


def ttl_expired(item: LoggedRecord, clock_ms: int) -> bool:
    """Has the record's own TTL (if any) run out by log clock ``clock_ms``?"""
    ttl = item.record.ttl_ms
    return ttl is not None and item.append_time_ms + ttl <= clock_ms


class RetainedRecords:
    """A topic's retained range and the records in it, read from the log entries that hold
    them (module docstring); the base of ``raftlog.topics.reads.TopicReader``."""

    def __init__(
        self, index: TopicIndex, entries: EntrySource, compacted: CompactedStore | None = None
    ) -> None:
        self._index = index
        self._entries = entries
        self._compacted = compacted if compacted is not None else CompactedStore(index)
        self.decoded = DecodedEntries(entries, decode_any_entry)
        """The entries read last, decoded (many readers of a live topic read the same)."""

    # -- what is retained ------------------------------------------------------------------
    def start(self, name: str, state: TopicState, clock_ms: int, applied: int) -> RecordId:
        """No record before this id is retained (incarnation, low-water, time and size
        retention); records from it on are, except those whose own TTL ran out."""
        start = max(RecordId(state.created_index, 0), state.low_water)
        props = state.properties
        if props.retention_ms is not None:
            first = self._index.first_index_at(max(0, clock_ms - props.retention_ms + 1))
            start = max(start, RecordId(applied + 1 if first is None else first, 0))
        if props.max_bytes is not None:
            start = max(start, self._size_start(name, props.max_bytes, applied))
        return start

    def _size_start(self, name: str, max_bytes: int, applied: int) -> RecordId:
        """The first record whose bytes published from it on fit in ``max_bytes``."""
        threshold = self._index.published_bytes(name) - max_bytes
        if threshold <= 0:
            return RecordId(0, 0)
        index = self._index.first_entry_past_bytes(name, threshold)
        if index is None:
            return RecordId(applied + 1, 0)
        entry = self._index.entry(name, index)
        if entry is None:  # its keys left with the log prefix: its records are gone
            return RecordId(index + 1, 0)
        records = self.records_at(entry.index)
        if records is None:  # compacted: only possible when it holds nothing retained
            return RecordId(entry.index + 1, 0)
        published = entry.bytes_before
        for position in entry.positions:
            if published >= threshold:
                return RecordId(entry.index, position)
            published += records[position].size
        return RecordId(entry.index + 1, 0)

    def retention_due(
        self, name: str, state: TopicState, clock_ms: int, applied: int
    ) -> int | None:
        """The log-clock time at which the topic's oldest retained entry expires by its
        ``retention_ms`` (None: no time retention, or nothing retained): one or two seeks
        (``raftlog.topics.retention_schedule`` keeps these per topic)."""
        retention = state.properties.retention_ms
        if retention is None:
            return None
        start = self.start(name, state, clock_ms, applied)
        entry = next(self._index.entries(name, start.index), None)
        return None if entry is None else entry.append_time_ms + retention

    def low_water(self, name: str, state: TopicState, start: RecordId) -> RecordId:
        """The position just after the last record that retention removed (``start`` is
        ``self.start(...)``): a read from below it would miss records."""
        low = max(RecordId(state.created_index, 0), state.low_water)
        entry = self._index.entry(name, start.index) if start.position else None
        if entry is not None and entry.positions[0] < start.position:
            return max(low, start)
        before = next(self._index.entries_before(name, start.index), None)
        if before is not None and before.index >= state.created_index:
            low = max(low, RecordId(before.index, before.positions[-1] + 1))
        return low

    def records(
        self, name: str, start: RecordId, clock_ms: int, skips: SkipBudget | None = None
    ) -> Iterator[LoggedRecord]:
        """Retained records of ``name`` from id ``start`` on (``start`` already at or above
        the retention start), in log order; passing over TTL-expired ones spends ``skips``
        (the walk ends where it runs out)."""
        for entry in self._index.entries(name, start.index):
            records = self.records_at(entry.index)
            if records is None:
                continue  # compacted meanwhile, or not what the index says: skip, never fail
            for position in entry.positions:
                if entry.index == start.index and position < start.position:
                    continue
                if position >= len(records):
                    continue
                item = LoggedRecord(
                    RecordId(entry.index, position), entry.append_time_ms, records[position]
                )
                if not ttl_expired(item, clock_ms):
                    yield item
                elif skips is not None and not skips.skip(item.id):
                    return

    def first_retained(
        self, name: str, state: TopicState, clock_ms: int, applied: int
    ) -> RecordId | None:
        """The first retained record of the topic (None: none), scanning at most
        ``FIRST_RETAINED_SCAN`` TTL-expired ones (then the scan position, conservatively)."""
        start = self.start(name, state, clock_ms, applied)
        scanned = 0
        for entry in self._index.entries(name, start.index):
            records = self.records_at(entry.index)
            if records is None:
                continue
            for position in entry.positions:
                rid = RecordId(entry.index, position)
                if rid < start or position >= len(records):
                    continue
                record = records[position]
                ttl = record.ttl_ms
                if ttl is None or entry.append_time_ms + ttl > clock_ms:
                    return rid
                scanned += 1
                if scanned >= FIRST_RETAINED_SCAN:
                    return rid
        return None

    def _last_retained(
        self, name: str, start: RecordId, clock_ms: int, applied: int
    ) -> tuple[RecordId, int] | None:
        """The topic's last retained record and its append time, looking at most
        ``FIRST_RETAINED_SCAN`` TTL-expired ones from the end (then the one it stopped at:
        an upper bound, as the first is a lower one)."""
        looked = 0
        for entry in self._index.entries_before(name, applied + 1):
            if entry.index < start.index:
                return None
            records = self.records_at(entry.index)
            if records is None:
                return None
            for position in reversed(entry.positions):
                rid = RecordId(entry.index, position)
                if rid < start:
                    return None
                item = LoggedRecord(rid, entry.append_time_ms, records[position])
                looked += 1
                if not ttl_expired(item, clock_ms) or looked >= FIRST_RETAINED_SCAN:
                    return rid, entry.append_time_ms
        return None

    # -- the entries behind the index ------------------------------------------------------
    def _entry_at(self, index: int) -> object:
        """None when compacted meanwhile, or not what the index says: skip, never fail."""
        return self.decoded.get(index)

    def records_at(self, index: int) -> Sequence[Record] | None:
        """The records the index may point at in entry ``index``: a record batch's, or the
        stores a transaction commit there made visible, in order (None: compacted, or
        neither). A transactional store's own entry never answers: its records exist for
        readers only at their commit."""
        entry = self._entry_at(index)
        if isinstance(entry, RecordBatch):
            return entry.records
        if isinstance(entry, TxControl) and entry.op == "commit":
            stores = self._index.commit_stores(index)
            return None if stores is None else CommitRecords(stores, self.store_at)
        return None

    def store_at(self, index: int) -> TxStore | None:
        """The transactional store in entry ``index`` (None: compacted, or not a store);
        a store restored from a snapshot comes from its copy in the index."""
        entry = self._entry_at(index)
        if entry is None:
            data = self.store_data(index) if index < self._entries.first_index else None
            entry = self._decode(data) if data is not None else None
        return entry if isinstance(entry, TxStore) else None

    def store_data(self, index: int) -> bytes | None:
        """The topic entry data of store ``index``: from the log, or the index's copy."""
        if index >= self._entries.first_index:
            try:
                return self._entries.raw_entries(index, index + 1)[0][ENTRY_HEADER_SIZE:]
            except IndexError:
                return None
        return self._index.get(b"z" + u64(index), "transaction store copy")

    @staticmethod
    def _decode(data: bytes) -> object:
        try:
            return decode_any_entry(data)
        except RecordFormatError:
            return None
