"""When retention next moves, kept per topic as applies happen -- not found by walking topics.

Two questions are asked of the topic machine over and over, and their plain answers walk every
topic: the leader's clock asks once a second when the next retained record expires (to stamp
the log clock exactly then: ``raftlog.topics.clock``), and the compaction policy asks, every
housekeeping pass while compaction is due, how far the log may go without losing a retained
record. With 20,000 topics the walks took ~0.2 and ~0.4 s of the loop each time (an index seek,
or a seek and an entry decode, per topic), and nothing bounds the number of topics a client
with create rights makes: the loop would stall and the cluster elect again and again.

Both answers are a minimum over topics of a value that only moves one way between the events
the machine applies, so each is kept as a lazy min-heap holding, for
every topic that matters, a *lower bound* of its value (``raftlog.topics.keyed_heap``):

* :class:`RetentionDeadlines` -- for each topic with time retention that retains a record,
  the log-clock time its oldest retained entry expires. Applying a record to a topic with
  no deadline sets ``append time + retention_ms`` (an exact value: older retained entries
  would have set an earlier one); a create, update or delete sets the deadline to "now"
  (recomputed at the next look, when the index holds the change). At a look, every deadline
  the log clock has reached is recomputed from the index (one seek) and its topic reported
  as *passed* -- the topic totals (``raftlog.topics.counters``) advance exactly those.
* :class:`RetainedFloor` -- for each topic that retains a record in the log, an index at or
  below its first retained record. Records are only ever applied above every retained one, so
  a topic's first retained index never decreases within an incarnation, and a topic without
  one gets its first index as it is applied. A look recomputes only the topic on top until
  its stored bound is exact (each recompute that moves a bound moves it up).

So each look costs one recompute per topic whose value moved since the last look, plus one --
independent of how many topics there are. Values are never persisted: a machine resets both
heaps from its topics when it opens or restores a snapshot (every topic marked "look again"),
the one walk of all topics, once.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Final

from raftlog.topics.keyed_heap import KeyedMinHeap
from raftlog.topics.state import TopicState

__all__ = ["RetainedFloor", "RetentionDeadlines", "RetentionSchedule"]


DueOf = Callable[[str], "int | None"]
"""The log-clock time a topic's oldest retained entry expires by time retention (None: the
topic has no time retention or retains nothing), read from the index as of now."""


class RetentionDeadlines:
    """When each topic with time retention next loses a record (module docstring)."""

    def __init__(self, due_of: DueOf) -> None:
        self._due_of = due_of
        self._heap = KeyedMinHeap()
        self._passed: set[str] = set()

    def reset(self, topics: Mapping[str, TopicState]) -> None:
        """Start over from ``topics`` (open, snapshot restore): each with time retention is
        looked at again at the next :meth:`settle`."""
        self._heap.clear()
        for name, state in topics.items():
            if state.properties.retention_ms is not None:
                self._heap.set(name, 0)

    def applied(self, name: str, state: TopicState, append_time_ms: int) -> None:
        """Records of ``name`` were applied, stamped ``append_time_ms``: if it retains nothing
        older, they expire first. Called for every topic of every applied record entry."""
        retention = state.properties.retention_ms
        if retention is not None and name not in self._heap:
            self._heap.set(name, append_time_ms + retention)

    def changed(self, name: str, state: TopicState | None, clock_ms: int) -> None:
        """``name`` was created, updated (its retention or low-water mark) or deleted (None)
        at log clock ``clock_ms``: look again at the next settle (the index may not hold the
        change yet while the apply is in progress)."""
        if state is None or state.properties.retention_ms is None:
            self._heap.forget(name)
        else:
            self._heap.set(name, clock_ms)

    def settle(self, clock_ms: int) -> int | None:
        """Recompute every deadline the log clock ``clock_ms`` has reached (their topics are
        reported by :meth:`take_passed`); returns the next deadline (None: no record of a
        topic with time retention is retained)."""
        heap = self._heap
        while (top := heap.top()) is not None:
            due, name = top
            if due > clock_ms:
                return due
            self._passed.add(name)
            later = self._due_of(name)
            if later is None:
                heap.forget(name)
            else:
                heap.set(name, max(later, clock_ms + 1))  # always progress past this clock
        return None

    def take_passed(self) -> set[str]:
        """The topics whose deadline the settles since the last call found passed (their
        retention start moved, or may have): the topic totals advance these."""
        passed, self._passed = self._passed, set()
        return passed


FirstOf = Callable[[str], "int | None"]
"""The log index of a topic's first retained record, or an index below it (None: the topic
is gone, keeps its records in the index -- compacted -- or retains nothing), as of now."""


FLOOR_LOOKS: Final = 1_000
"""Topics one compaction-limit look recomputes at most (a seek or two each)."""


class RetainedFloor:
    """The lowest log index any topic still retains a record at (module docstring)."""

    def __init__(self, first_of: FirstOf) -> None:
        self._first_of = first_of
        self._heap = KeyedMinHeap()

    def reset(self, topics: Mapping[str, TopicState]) -> None:
        """Start over from ``topics`` (open, snapshot restore): every topic's records are at
        or above its incarnation's first index; each is looked at again when on top."""
        self._heap.clear()
        for name, state in topics.items():
            self._heap.set(name, state.created_index)

    def applied(self, names: Iterable[str], index: int) -> None:
        """Records of ``names`` were indexed at log ``index`` (above all they retain)."""
        heap = self._heap
        for name in names:
            if name not in heap:
                heap.set(name, index)

    def changed(self, name: str, state: TopicState | None) -> None:
        """``name`` was created, updated or deleted (None): its records (if any) are at or
        above its incarnation's first index."""
        if state is None:
            self._heap.forget(name)
        else:
            self._heap.set(name, state.created_index)

    def lowest(self, looks: int = FLOOR_LOOKS) -> int | None:
        """The log index of the first record any topic retains (None: no topic retains one
        in the log); recomputes topics on top until the top one is exact -- at most
        ``looks`` of them: past that the top's bound, lower than or equal to the exact
        answer (30,000 topics just created cost 0.3-0.4 s of the loop to look at at once;
        the next call goes on)."""
        heap = self._heap
        while (top := heap.top()) is not None:
            bound, name = top
            if looks <= 0:
                return bound
            looks -= 1
            first = self._first_of(name)
            if first is None:
                heap.forget(name)
            elif first <= bound:
                return first
            else:
                heap.set(name, first)
        return None


class RetentionSchedule:
    """Both heaps, fed by the topic machine's apply in one call per event."""

    def __init__(self, due_of: DueOf, first_of: FirstOf) -> None:
        self.deadlines = RetentionDeadlines(due_of)
        self.floor = RetainedFloor(first_of)

    def reset(self, topics: Mapping[str, TopicState]) -> None:
        """Start over from ``topics`` (open, snapshot restore)."""
        self.deadlines.reset(topics)
        self.floor.reset(topics)

    def applied(
        self, index: int, names: Iterable[str], topics: Mapping[str, TopicState], clock_ms: int
    ) -> None:
        """Entry ``index``, stamped ``clock_ms``, indexed records of ``names`` (all in
        ``topics``); a compacted topic keeps its records in the index, not the log."""
        deadlines, in_log = self.deadlines, []
        for name in names:
            state = topics[name]
            deadlines.applied(name, state, clock_ms)
            if not state.properties.compacted:
                in_log.append(name)
        self.floor.applied(in_log, index)

    def changed(self, name: str, state: TopicState | None, clock_ms: int) -> None:
        """``name`` was created, updated or deleted (None) at log clock ``clock_ms``."""
        self.deadlines.changed(name, state, clock_ms)
        self.floor.changed(name, state)
