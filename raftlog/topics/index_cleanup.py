"""``IndexCleanup``: the topic index's clean-up after a log compaction, a slice a timer pass.

Why: once the log no longer holds the entries below its new start (the *floor*), the index
drops its rows of them -- each topic's record and size rows (but the last entry below the
floor: where its records ended), the compacted topics' superseded copies and those latest
ones that expired, the shared commit, time and entry-time rows, ended transactions. Done in
one pass it walked every topic and every compacted copy below the floor: 2.5 s of the loop
at 30,000 topics, right after each compaction, long enough for the followers to elect. Here
each pass does at most ``WORK_PER_PASS`` (a topic counts ``TOPIC_WORK``, a compacted copy
one) and the next pass goes on; the shared rows go last. Nothing a reader or a snapshot
needs goes: everything dropped is below the floor, and a snapshot is never taken below it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final

from rocksdict import WriteBatch

from raftlog.topics.compacted import CompactedStore
from raftlog.topics.index import TopicIndex
from raftlog.topics.records import RecordId
from raftlog.topics.state import TopicState
from raftlog.topics.tx import TransactionTable

WORK_PER_PASS: Final = 5_000
"""What one pass does at most (~20-40 ms)."""
TOPIC_WORK: Final = 10
"""A topic's row drops count as this many copies (a seek or two and two range deletes)."""


@dataclass(slots=True)
class _Round:
    """One floor's clean-up under way."""

    floor: int
    clock_ms: int
    """The log clock at ``floor - 1``: what compacted copies below it expired by."""
    names: list[str]
    at: int = 0
    """The next topic of ``names``."""
    start: RecordId = field(default_factory=lambda: RecordId(0, 0))
    """The compacted topic at ``at``: where its copies below the floor are read on from."""
    seen: dict[bytes, RecordId] = field(default_factory=dict)
    """... the latest copy so far of each key,"""
    expired: list[tuple[bytes, RecordId]] | None = None
    """... once all are read, those latest copies, whose expiry is then looked at,"""
    done: int = 0
    """... up to here."""
    transactions: bytes = b""
    """Then the transaction rows: looked at up to this one (none yet: empty)."""

    def next_topic(self) -> None:
        """The topic at ``at`` is clean."""
        self.at, self.start, self.seen = self.at + 1, RecordId(0, 0), {}
        self.expired, self.done = None, 0


class IndexCleanup:
    """Drops index rows below the log's start, a slice a pass (module docstring)."""

    def __init__(
        self,
        index: TopicIndex,
        compacted: CompactedStore,
        tx: TransactionTable,
        before_drop: Callable[[str], None] = lambda _topic: None,
    ) -> None:
        """``before_drop(topic)``: what must read the topic's rows below the floor before
        they go (the topic totals count what compaction passed: ``counters``)."""
        self._index = index
        self._compacted = compacted
        self._tx = tx
        self._before_drop = before_drop
        self.floor = 0
        """Everything below it is clean."""
        self._round: _Round | None = None

    def reset(self, floor: int) -> None:
        """A snapshot restore replaced the index: nothing below ``floor`` is left."""
        self.floor, self._round = floor, None

    def run(
        self, floor: int, topics: Mapping[str, TopicState], names: Sequence[str], base_time: int
    ) -> None:
        """One timer pass: go on with the clean-up, or start one for a new ``floor`` (the
        log's first index); ``names`` are the topics in order, ``base_time`` the log clock
        a restored snapshot started from."""
        round_ = self._round
        if round_ is None:
            if floor <= self.floor:
                return
            at = self._index.time_at(floor - 1)
            round_ = self._round = _Round(floor, base_time if at is None else at[1], list(names))
        batch = self._index.batch()
        work = WORK_PER_PASS
        while work > 0 and round_.at < len(round_.names):
            name = round_.names[round_.at]
            state = topics.get(name)
            if state is not None and state.properties.compacted:
                work = self._copies(batch, round_, name, state, work)
                if work <= 0:
                    break
            if state is not None:
                self._before_drop(name)
                self._index.drop_topic_below(batch, name, round_.floor)
            round_.next_topic()
            work -= TOPIC_WORK
        if round_.at >= len(round_.names) and work > 0:  # then the shared rows
            if round_.transactions == b"":
                self._index.drop_shared_below(batch, round_.floor)
            left = self._tx.collect(batch, round_.floor - 1, round_.transactions, work)
            if left is None:
                self.floor, self._round = round_.floor, None
            else:
                round_.transactions = left
        self._index.write(batch, "topic index cleanup")

    def _copies(
        self, batch: WriteBatch, round_: _Round, name: str, state: TopicState, work: int
    ) -> int:
        """Drop the topic's superseded copies below the floor, then -- its copies read -- the
        latest ones that expired by the floor's clock (a key whose last copy that is loses
        its pointer too); returns the work left (0: go on next pass)."""
        if round_.expired is None:
            upto = RecordId(round_.floor, 0)
            for rid, key, _ in self._compacted.copies(name, round_.start, upto):
                if work <= 0:
                    round_.start = rid
                    return 0
                work -= 1
                older = round_.seen.get(key)
                if older is not None:
                    CompactedStore.drop_copy(batch, name, older)
                round_.seen[key] = rid
            round_.expired = list(round_.seen.items())
        props = state.properties
        while round_.done < len(round_.expired):
            if work <= 0:
                return 0
            key, rid = round_.expired[round_.done]
            round_.done, work = round_.done + 1, work - 1
            pointer = self._compacted.pointer(name, key)
            if pointer is None or pointer.id != rid or pointer.live(props, round_.clock_ms):
                continue  # superseded later, or still alive: kept
            CompactedStore.drop_copy(batch, name, rid, key)
        return max(work, 1)
