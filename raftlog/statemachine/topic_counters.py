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
  time and size retention, the low-water mark and the incarnation (``topic_reads.start``).
  Records hidden earlier by their own per-record TTL still count until the topic's window
  passes them (counting TTL expiries would need every TTL record's deadline tracked, also
  across restarts); so for a topic that relies on per-record TTLs the gauges are an upper
  bound.
* *published records/bytes* (counters): records this peer applied to the topic since the
  process started (Prometheus counters restart at zero with the process; ``rate()`` copes).
* *expired records/bytes* (counters): records that time or size retention removed since the
  process started (a deleted topic's records are not "expired": the topic is gone).

Survives restart and snapshot install by derivation, not persistence: on load (and after a
restore) each topic is *seeded* from the index -- one walk of its retained keys, at start-up
only -- so nothing here is ever written to disk or has to agree with the index format.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Final, Protocol, TypeVar

from raftlog.records import RecordBatch, RecordId
from raftlog.statemachine.topic_index import EntryRecords

MAX_SEED_ENTRIES: Final = 10_000_000
"""Entries walked at most to seed one topic (a safety bound: a bigger topic's count starts
from what was walked and says so in ``TopicTotals.seeded_exactly``)."""

_S = TypeVar("_S")


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


TopicStat = tuple[str, int, int, int, int, int, int]
"""``(topic, records, bytes, published_records, published_bytes, expired_records,
expired_bytes)``: one topic in a published view (a plain tuple: cheap to copy every 200 ms)."""


class TopicCounters:
    """The totals of every live topic (module docstring)."""

    def __init__(self, index: CounterIndex, batch_at: Callable[[int], RecordBatch | None]) -> None:
        """``batch_at(index)``: the record batch of a log entry (None: compacted), read only
        when size retention starts inside an entry, to size the records before the cut."""
        self._index = index
        self._batch_at = batch_at
        self._topics: dict[str, TopicTotals] = {}

    # -- fed by the machine's apply ---------------------------------------------------------
    def created(self, name: str, index: int) -> None:
        """A topic (re)created empty at log index ``index``."""
        self._topics[name] = TopicTotals(RecordId(index, 0))

    def deleted(self, name: str) -> None:
        """A topic deleted: its totals go with it."""
        self._topics.pop(name, None)

    def indexed(self, by_topic: Mapping[str, tuple[list[int], int]]) -> None:
        """One applied record entry: ``by_topic`` maps each topic to the positions of its
        records in the entry and their total size (what the machine indexes)."""
        topics = self._topics
        for name, (positions, size) in by_topic.items():
            totals = topics.get(name)
            if totals is None:  # not seeded yet (start-up catch-up): the seed counts these
                continue
            count = len(positions)
            totals.records += count
            totals.bytes += size
            totals.published_records += count
            totals.published_bytes += size

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

    def seed_all(
        self,
        topics: Mapping[str, _S],
        start_of: Callable[[str, _S], RecordId],
        first_index: int,
    ) -> None:
        """Forget everything and seed every topic from its retention start (as
        :meth:`advance_all` computes it)."""
        self._topics.clear()
        floor = RecordId(first_index, 0)
        for name, state in topics.items():
            self.seed(name, max(start_of(name, state), floor))

    # -- retention ----------------------------------------------------------------------------
    def advance_all(
        self,
        topics: Mapping[str, _S],
        start_of: Callable[[str, _S], RecordId],
        first_index: int,
    ) -> None:
        """:meth:`advance` every topic to its retention start (``start_of(name, state)``), or
        to the log's ``first_index`` when compaction passed that: records below it are gone
        (only per-record TTLs let compaction pass a topic's retention start)."""
        floor = RecordId(first_index, 0)
        for name, state in topics.items():
            self.advance(name, max(start_of(name, state), floor))

    def advance(self, name: str, start: RecordId) -> None:
        """Retention now starts at ``start`` for ``name``: count what it removed since the
        last call (only the removed entries' keys are walked). Call before the index drops
        keys below the log's first index, or the removed range may be gone."""
        totals = self._topics.get(name)
        if totals is None:
            self.seed(name, start)
            return
        old = totals.start
        if start <= old:
            return
        removed = 0
        for entry in self._index.entries(name, old.index):
            if entry.index > start.index:
                break
            removed += sum(1 for p in entry.positions if old <= RecordId(entry.index, p) < start)
        gone = max(0, self._bytes_before(name, start) - self._bytes_before(name, old))
        gone = min(gone, totals.bytes)
        removed = min(removed, totals.records)
        totals.start = start
        totals.records -= removed
        totals.bytes -= gone
        totals.expired_records += removed
        totals.expired_bytes += gone

    def _bytes_before(self, name: str, rid: RecordId) -> int:
        """Bytes published to the topic before record ``rid`` (its running byte sum)."""
        entry = next(self._index.entries(name, rid.index), None)
        if entry is None:
            return self._index.published_bytes(name)
        before = entry.bytes_before
        if entry.index != rid.index or rid.position == 0:
            return before
        batch = self._batch_at(entry.index)
        if batch is None:
            return before
        for position in entry.positions:
            if position >= rid.position or position >= len(batch.records):
                break
            before += batch.records[position].size
        return before

    # -- reading ------------------------------------------------------------------------------
    def get(self, name: str) -> TopicTotals | None:
        """``name``'s totals (None: no such topic, or not seeded yet)."""
        return self._topics.get(name)

    def stats(self, limit: int) -> tuple[TopicStat, ...]:
        """The first ``limit`` topics by name, as plain tuples for a published view."""
        out: list[TopicStat] = []
        for name in sorted(self._topics)[:limit]:
            t = self._topics[name]
            out.append(
                (
                    name,
                    t.records,
                    t.bytes,
                    t.published_records,
                    t.published_bytes,
                    t.expired_records,
                    t.expired_bytes,
                )
            )
        return tuple(out)
