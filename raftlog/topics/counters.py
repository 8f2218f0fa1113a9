"""Per-topic totals for monitoring: retained records and bytes, published and expired counts.

Why a separate object the topic machine only *feeds*: the index has no cheap "how many
records does topic T hold" (records are read from the log; the index keeps one key per entry
and topic), and counting them on every scrape would walk a topic's keys. Instead the machine
tells this object what each apply indexed (the per-topic positions and byte sizes it computes
anyway: one dict update per topic of an entry), and once a second, just before its index
clean-up drops old keys, lets it *advance* each topic's retention cursor: the records between
the old and the new retention start are the ones retention removed, counted by walking only
those keys (amortised: each entry's key is walked once in its lifetime).

The definitions (docs/operations.md §9 lists the metrics built on them):

* *retained records/bytes* of a topic (gauges): its records from the retention start on --
  time and size retention, the low-water mark and the incarnation (``topic_reads.start``)
  -- minus those whose own per-record TTL ran out. The machine reports each TTL record as
  it applies it (``ttl``); a record with a TTL applied *before the peer's last start* is
  not known here, so it counts until the topic's window passes it (an upper bound for
  topics relying on TTLs, until their pre-restart records age out of the window).
* *published records/bytes* (counters): records this peer applied to the topic since the
  process started (Prometheus counters restart at zero with the process; ``rate()`` copes).
* *expired records/bytes* (counters): records that time, size or TTL retention removed
  since the process started (a deleted topic's records are not "expired": the topic is
  gone).

Survives restart and snapshot install by derivation, not persistence: on load (and after a
restore) each topic is *seeded* from the index -- one walk of its retained keys, at start-up
only -- so nothing here is ever written to disk or has to agree with the index format.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final, Protocol

from raftlog.topics.index import EntryRecords
from raftlog.topics.records import Record, RecordId
from raftlog.topics.state import TopicState

MAX_SEED_ENTRIES: Final = 10_000_000
"""Entries walked at most to seed one topic (a safety bound: a bigger topic's count starts
from what was walked and says so in ``TopicTotals.seeded_exactly``)."""


class RetentionReader(Protocol):
    """Where a topic's retention starts (``TopicReader.start``) and the records the index
    may point at in a log entry (``TopicReader.records_at``: a batch's, or a commit's)."""

    def start(self, name: str, state: TopicState, clock_ms: int, applied: int) -> RecordId:
        """No record before this id is retained."""
        ...

    def records_at(self, index: int) -> Sequence[Record] | None:
        """The records entry ``index`` made visible (None: compacted, or none)."""
        ...


class FirstIndex(Protocol):
    """The log's first readable index (``LogStore.first_index``)."""

    @property
    def first_index(self) -> int:
        """The first index readable as an entry."""
        ...


class TopicMachineState(Protocol):
    """What the counters read from the topic machine when they seed or advance."""

    @property
    def topics(self) -> Mapping[str, TopicState]:
        """The live topics as of the applied index."""
        ...

    @property
    def last_time(self) -> int:
        """The log clock."""
        ...

    @property
    def last_applied(self) -> int:
        """The applied index."""
        ...

    def retention_passed(self) -> set[str]:
        """The topics whose time retention removed a record (or may have) since the last
        call (``raftlog.topics.retention_schedule``)."""
        ...


class CounterIndex(Protocol):
    """What the counters read from the topic index (``TopicIndex``)."""

    def entries(self, topic: str, start_index: int) -> Iterator[EntryRecords]:
        """``topic``'s record entries from ``start_index`` on, in log order."""
        ...

    def published_bytes(self, topic: str) -> int:
        """Bytes published to the topic's current incarnation (one seek)."""
        ...


@dataclass(slots=True)
class TopicTotals:
    """One topic's totals (mutable: updated in place by the machine's thread)."""

    start: RecordId
    """The retention cursor: records before it are counted as gone."""
    records: int = 0
    bytes: int = 0
    published_records: int = 0
    published_bytes: int = 0
    expired_records: int = 0
    expired_bytes: int = 0
    seeded_exactly: bool = True
    ttl_due: list[tuple[int, int, int, int]] = field(default_factory=list)
    """Heap of ``(deadline, index, position, size)`` of the TTL records applied."""
    ttl_gone: dict[RecordId, int] = field(default_factory=dict)
    """TTL-expired records at or after ``start`` (already subtracted) and their sizes."""

    def figures(self) -> tuple[int, int, int, int, int, int]:
        """What the metrics show: retained, published and expired records and bytes (the
        cursor and TTL heaps are how they are kept, not what they are)."""
        return (self.records, self.bytes, self.published_records, self.published_bytes,
                self.expired_records, self.expired_bytes)


def _at_rest(state: TopicState, totals: TopicTotals, first_index: int, clock_ms: int) -> bool:
    """Whether :meth:`TopicCounters.advance` would leave ``totals`` as they are: no window
    (so the retention start -- ``TopicCounters._start`` over ``TopicReads.start`` -- is the
    largest of the incarnation, the low-water mark and the log's first index) that has moved
    past the cursor, and no record TTL due or expired. Compared without building that start:
    this runs for every topic every second."""
    props = state.properties
    if props.retention_ms is not None or props.max_bytes is not None or totals.ttl_gone:
        return False
    due = totals.ttl_due
    if due and due[0][0] <= clock_ms:
        return False
    cursor, low = totals.start, state.low_water
    # RecordId's own order, compared as tuples: its generated ``__le__`` is a Python call per
    # topic (9.4 against 7.5 ms for 20,000 topics)
    past_start = max(state.created_index, first_index) <= cursor.index
    return past_start and (low.index, low.position) <= (cursor.index, cursor.position)


def _looked_at_again(state: TopicState, totals: TopicTotals | None) -> bool:
    """Must the next pass look at a topic just advanced though no event names it? Yes without
    a window (cheap: ``_at_rest``) or with record TTLs pending. A window moves only on
    events that name the topic: its deadline passing (``retention_passed``), records
    published to it (``indexed``), an update (``topic_set``), a first-index move. (Advancing
    each of 20,000 windows every pass cost ~0.7 s of every peer's loop a second.)"""
    props = state.properties
    if props.retention_ms is None and props.max_bytes is None:
        return True
    return totals is not None and bool(totals.ttl_due or totals.ttl_gone)


def _first_index_behind(state: TopicState, totals: TopicTotals, first_index: int) -> bool:
    """A topic with a window and nothing else pending, whose cursor the log's first index did
    not pass: a compaction changes nothing for it (advancing 20,000 cost ~50 ms)."""
    return first_index <= totals.start.index and not _looked_at_again(state, totals)


TopicStat = tuple[str, int, int, int, int, int, int]
"""``(topic, records, bytes, published_records, published_bytes, expired_records,
expired_bytes)``: one topic in a published view (a plain tuple: cheap to copy every 200 ms)."""


class TopicCounters:
    """The totals of every live topic (module docstring)."""

    def __init__(self, index: CounterIndex, reader: RetentionReader, log: FirstIndex) -> None:
        """``reader.records_at`` is read only when size retention starts inside an entry, to
        size the records before the cut."""
        self._index = index
        self._reader = reader
        self._log = log
        self._topics: dict[str, TopicTotals] = {}
        self._first: tuple[int, tuple[str, ...]] | None = None
        """``(limit, names)`` of the last ``first_names`` call, until a topic comes or goes."""
        self._moving: set[str] = set()
        """The topics the next retention pass visits: those it could not skip last time,
        those with record TTLs pending, and those an event may have moved since (created,
        seeded, updated, given a TTL record). Every other topic is at rest until one of those
        events or a move of the log's first index (``advance_all``)."""
        """The log's first index at the last pass (None: walk every topic next time)."""

    # -- fed by the machine's apply ---------------------------------------------------------
    def topic_set(self, name: str, index: int, state: TopicState | None) -> None:
        """The machine set ``name``'s state at log index ``index``: deleted (None), created
        empty (a new incarnation: ``created_index == index``), or updated (its properties or
        low-water mark changed, so its retention start may have)."""
        if state is None:
            self._topics.pop(name, None)
            self._moving.discard(name)
        else:
            if state.created_index == index:
                self._topics[name] = TopicTotals(RecordId(index, 0))
            self._moving.add(name)
        self._first = None

    def indexed(self, by_topic: Mapping[str, tuple[list[int], int]]) -> None:
        """One applied record entry: ``by_topic`` maps each topic to the positions of its
        records in the entry and their total size (what the machine indexes)."""
        topics, moving = self._topics, self._moving
        for name, (positions, size) in by_topic.items():
            totals = topics.get(name)
            if totals is None:  # not seeded yet (start-up catch-up): the seed counts these
                continue
            moving.add(name)  # size retention may have moved (``_looked_at_again``)
            count = len(positions)
            totals.records += count
            totals.bytes += size
            totals.published_records += count
            totals.published_bytes += size

    def ttl(self, name: str, index: int, position: int, deadline_ms: int, size: int) -> None:
        """An applied record with its own TTL: it expires when the log clock reaches
        ``deadline_ms`` (``append time + ttl_ms``, as ``raftlog.topics.retention.ttl_expired``)."""
        totals = self._topics.get(name)
        if totals is not None:
            heapq.heappush(totals.ttl_due, (deadline_ms, index, position, size))
            self._moving.add(name)

    # -- seeding (start-up, restore) ----------------------------------------------------------
    def seed(self, name: str, start: RecordId) -> None:
        """Derive ``name``'s retained totals from the index (records from ``start`` on)."""
        totals = TopicTotals(start)
        for walked, entry in enumerate(self._index.entries(name, start.index)):
            if walked >= MAX_SEED_ENTRIES:
                totals.seeded_exactly = False
                break
            totals.records += sum(1 for p in entry.positions if RecordId(entry.index, p) >= start)
        totals.bytes = max(0, self._index.published_bytes(name) - self._bytes_before(name, start))
        self._topics[name] = totals
        self._first = None
        self._moving.add(name)

    def seed_all(self, machine: TopicMachineState) -> None:
        """Forget everything and seed every topic of ``machine`` from its retention start
        (as :meth:`advance_all` computes it): at start-up and after a snapshot restore."""
        self._topics.clear()
        self._first = None
        for name, state in machine.topics.items():
            self.seed(name, self._start(machine, name, state))

    def _start(self, machine: TopicMachineState, name: str, state: TopicState) -> RecordId:
        """The topic's retention start, or the log's first index when compaction passed
        it: records below it are gone (only per-record TTLs let compaction pass a topic's
        retention start)."""
        start = self._reader.start(name, state, machine.last_time, machine.last_applied)
        return max(start, RecordId(self._log.first_index, 0))

    # -- retention ----------------------------------------------------------------------------
    def advance_all(self, machine: TopicMachineState) -> None:
        """:meth:`advance` every topic of ``machine`` whose totals may have moved (once a
        second): not a topic at rest (``_at_rest``: no window, cursor at its start, no TTL
        due -- most topics), nor is it looked at again until it is updated, re-created or
        given a TTL record (back in ``_moving``); a topic with a window only when it may have
        moved (``_looked_at_again``). A log compaction's move of the first index is seen
        topic by topic as the index clean-up reaches them (:meth:`compacted_past`): walking
        every topic at once held the loop 1.9 s at 30,000 topics (docs/performance.md §3)."""
        named = self._moving | machine.retention_passed()
        self._moving = set()
        for name in named:
            self._visit(machine, name, walked=False)

    def compacted_past(self, machine: TopicMachineState, name: str) -> None:
        """The log's first index moved, perhaps past ``name``'s cursor: advance it now,
        before the index clean-up drops the keys the advance walks (``index_cleanup``)."""
        self._visit(machine, name, walked=True)

    def _visit(self, machine: TopicMachineState, name: str, *, walked: bool) -> None:
        state = machine.topics.get(name)
        if state is None:
            return
        first, clock = self._log.first_index, machine.last_time
        totals = self._topics.get(name)
        if walked and totals is not None and _first_index_behind(state, totals, first):
            return
        if totals is not None and _at_rest(state, totals, first, clock):
            if totals.ttl_due:  # at rest until its first TTL falls due
                self._moving.add(name)
            return
        self.advance(name, self._start(machine, name, state), clock)
        if _looked_at_again(state, self._topics.get(name)):
            self._moving.add(name)

    def advance(self, name: str, start: RecordId, clock_ms: int) -> None:
        """Retention now starts at ``start`` for ``name`` and the log clock is at
        ``clock_ms``: count what the window and the TTLs removed since the last call (only
        the removed entries' keys are walked). Call before the index drops keys below the
        log's first index, or the removed range may be gone."""
        totals = self._topics.get(name)
        if totals is None:
            self.seed(name, start)
            return
        if start > totals.start:
            self._move_window(name, totals, start)
        due = totals.ttl_due
        while due and due[0][0] <= clock_ms:
            _, index, position, size = heapq.heappop(due)
            rid = RecordId(index, position)
            if rid >= totals.start and rid not in totals.ttl_gone:
                totals.ttl_gone[rid] = size
                self._expire(totals, 1, size)
        if totals.ttl_gone:
            self._skip_expired_prefix(name, totals)

    def _skip_expired_prefix(self, name: str, totals: TopicTotals) -> None:
        """Move the cursor over the TTL-expired records at its front (counted already), so
        ``ttl_gone`` holds only the expired records behind a still-retained one: without
        this a topic with TTLs but no time/size window would remember every expired record
        (walks only the records skipped, plus one)."""
        gone = totals.ttl_gone
        cursor = totals.start
        for entry in self._index.entries(name, cursor.index):
            for position in entry.positions:
                rid = RecordId(entry.index, position)
                if rid < cursor:
                    continue
                if gone.pop(rid, None) is None:
                    totals.start = rid
                    return
                cursor = RecordId(entry.index, position + 1)
        totals.start = cursor

    def _move_window(self, name: str, totals: TopicTotals, start: RecordId) -> None:
        old = totals.start
        removed = 0
        for entry in self._index.entries(name, old.index):
            if entry.index > start.index:
                break
            removed += sum(1 for p in entry.positions if old <= RecordId(entry.index, p) < start)
        gone = max(0, self._bytes_before(name, start) - self._bytes_before(name, old))
        # records a TTL removed already were subtracted then
        for rid in [r for r in totals.ttl_gone if r < start]:
            removed -= 1
            gone -= totals.ttl_gone.pop(rid)
        totals.start = start
        self._expire(totals, removed, gone)

    @staticmethod
    def _expire(totals: TopicTotals, records: int, size: int) -> None:
        records = max(0, min(records, totals.records))
        size = max(0, min(size, totals.bytes))
        totals.records -= records
        totals.bytes -= size
        totals.expired_records += records
        totals.expired_bytes += size

    def _bytes_before(self, name: str, rid: RecordId) -> int:
        """Bytes published to the topic before record ``rid`` (its running byte sum)."""
        entry = next(self._index.entries(name, rid.index), None)
        if entry is None:
            return self._index.published_bytes(name)
        before = entry.bytes_before
        if entry.index != rid.index or rid.position == 0:
            return before
        records = self._reader.records_at(entry.index)
        if records is None:
            return before
        for position in entry.positions:
            if position >= rid.position or position >= len(records):
                break
            before += records[position].size
        return before

    # -- reading ------------------------------------------------------------------------------
    def get(self, name: str) -> TopicTotals | None:
        """``name``'s totals (None: no such topic, or not seeded yet)."""
        return self._topics.get(name)

    def first_names(self, limit: int) -> tuple[str, ...]:
        """The first ``limit`` live topics by name: the status view's list, built five times
        a second. These are the machine's topics (``topic_set`` and the seeding follow them
        one for one), sorted once per change of the set, not per view: sorting 50,000 names
        twice per view was over a quarter of what a peer idle with that many topics still
        spent (docs/performance.md §3, "Many topics")."""
        first = self._first
        if first is None or first[0] != limit:
            first = self._first = (limit, tuple(sorted(self._topics)[:limit]))
        return first[1]

    def stats(self, limit: int) -> tuple[TopicStat, ...]:
        """The first ``limit`` topics by name, as plain tuples for a published view."""
        return tuple((name, *self._topics[name].figures()) for name in self.first_names(limit))
