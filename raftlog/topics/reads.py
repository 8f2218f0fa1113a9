"""The read side of the topic machine: ``TR`` reads, ``TD`` describe and ``TC`` counts.

Kept apart from the apply side (``topics``) because reads touch only the index and the log
and must never change either. One set of rules serves every way of reading a topic -- ``TR``
reads (and so ``subscribe``/``--follow`` and the Spark source, which page through ``TR``),
``TD`` describe, and the compaction limit -- so they cannot disagree. Those rules (the
current incarnation only, retention as a function of the log alone, per-record TTLs, the
low-water mark) live in ``raftlog.topics.retention`` (``RetainedRecords``, the base of
``TopicReader``); this module builds the answers on them.

Every read starts at the highest of the floors, each found by one seek, then walks the
topic's own keys only: unrelated entries are never read.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Final

from raftlog.errors import RecordsExpiredError
from raftlog.topics import wire as rpc
from raftlog.topics import wire_counts as topic_counts
from raftlog.topics.counting import COUNT_WORK, count_part
from raftlog.topics.records import LoggedRecord, RecordId, SkipBudget, records_within
from raftlog.topics.retention import RetainedRecords
from raftlog.topics.state import TopicState

READ_BUDGET: Final = 4 * 1024 * 1024
"""Record bytes per read answer at most; a first record larger than it is sent alone (so a
reader always progresses). Why not "until past it": the record that passed it made an
answer up to 14 MiB, and every bound built on a read's size (the REST and Kafka answer
memories) was off by that record."""


SKIP_SCAN: Final = 2_000
"""Records a read (or each end of a compacted topic's ``TD``) passes over at most without
answering them -- superseded or expired copies of a compacted topic (~15 µs each), records
whose TTL ran out: ~30 ms of the loop at most (``SkipBudget``)."""


class TopicReader(RetainedRecords):
    """Answers ``TR``/``TD`` and the compaction limit with one set of rules (module
    docstring): records are read from the log entries that hold them, so the index stays small."""

    count_work: int = COUNT_WORK
    """Index keys one ``TC`` answer reads at most (``raftlog.topics.counting``)."""

    # -- reads -----------------------------------------------------------------------------
    def _requested(self, req: rpc.ReadRequest) -> RecordId | None:
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
        self,
        state: TopicState,
        req: rpc.ReadRequest,
        applied: int,
        is_leader: bool,
        clock_ms: int,
    ) -> rpc.ReadResult:
        """Retained records from the requested start. An explicit start (``from_index``)
        below what retention removed raises ``RecordsExpiredError``: the reader would
        otherwise silently skip records; a start in an earlier incarnation of the topic is
        not an error (those records were deleted with it). A compacted topic answers its
        live records from the requested start (``raftlog.topics.compacted``): superseded
        and expired ones are skipped, never an error."""
        if state.properties.compacted:
            start = RecordId(state.created_index, 0)
        else:
            start = self.start(req.topic, state, clock_ms, applied)
        requested = self._requested(req)
        if (
            req.from_index is not None
            and requested is not None
            and RecordId(state.created_index, 0) <= requested < start
            and not state.properties.compacted
        ):
            low = self.low_water(req.topic, state, start)
            if requested < low:
                first = self.first_retained(req.topic, state, clock_ms, applied) or low
                raise RecordsExpiredError(
                    f"records of topic {req.topic!r} before {low} were removed by its "
                    f"retention; the first available position is {first}",
                    (first.index, first.position),
                )
        out: list[LoggedRecord] = []
        more = False
        skips = SkipBudget(SKIP_SCAN)
        if requested is not None:
            props = state.properties
            items = (
                self._compacted.records(req.topic, max(requested, start), props, clock_ms, skips)
                if props.compacted
                else self.records(req.topic, max(requested, start), clock_ms, skips)
            )
            out, more = records_within(items, READ_BUDGET, req.limit)
        if not more and skips.stopped_at is not None:  # more may follow where it stopped
            return rpc.ReadResult(tuple(out), applied, is_leader, True, skips.stopped_at)
        return rpc.ReadResult(tuple(out), applied, is_leader, more)

    def counts(
        self,
        req: topic_counts.CountsRequest,
        topics: tuple[Sequence[str], Callable[[str], TopicState | None]],
        applied: int,
        clock_ms: int,
    ) -> topic_counts.CountsResult:
        """``TC``: records per index bucket from the index alone, under the same floors as
        :meth:`read` (compaction, each topic's retention) and never beyond ``applied``, in
        bounded parts (``raftlog.topics.counting``); ``topics`` are the names to count, in
        order, and their states."""
        position = (applied, self._entries.first_index)
        start = lambda name, state: self.start(name, state, clock_ms, applied).index  # noqa: E731
        return count_part(req, self._index, topics, start, position, budget=self.count_work)

    def describe(self, name: str, state: TopicState, clock_ms: int, applied: int) -> rpc.TopicInfo:
        """``TD``: properties, first/last retained record, low-water, bytes, log clock (a
        compacted topic: its first and last live records)."""
        start = self.start(name, state, clock_ms, applied)
        if state.properties.compacted:
            first, tail = self._compacted.edges(
                name, state.created_index, state.properties, clock_ms, SKIP_SCAN
            )
            last = None if tail is None else (tail.id, tail.append_time_ms)
        else:
            first = self.first_retained(name, state, clock_ms, applied)
            last = None if first is None else self._last_retained(name, start, clock_ms, applied)
        return rpc.TopicInfo(
            name,
            state.properties,
            state.created_index,
            first,
            None if last is None else last[0],
            None if last is None else last[1],
            self.low_water(name, state, start),
            self._index.published_bytes(name),
            clock_ms,
            applied,
        )
