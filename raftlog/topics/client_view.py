"""``TopicView``: the topic read rules as a filter, for readers of the raw log (Spark).

The topic index (``TR`` reads) is the one place that decides which records a topic holds.
A reader that scans the raw log instead -- the Spark source streams index ranges with
RequestEntries for speed -- must apply the same rules or it gives a different answer: the
records of a deleted incarnation, records past retention, refused batches. ``TopicView``
carries, per topic, what ``TD`` describe says at one applied index (creation index,
low-water mark, log clock) and admits a decoded record exactly when a ``TR`` read at that
applied index would return it:

* the topic exists, and the record is of its current incarnation (index >= created_index);
  a batch refused because its topic did not exist is thereby excluded as well;
* its id is at or above the low-water mark (time and size retention remove a prefix);
* its own TTL has not run out by the log clock.

One gap remains, stated rather than hidden: a batch refused at apply for exceeding
``max_record_bytes`` while the topic existed (only possible through a leader that does not
check, e.g. a reference peer) is admitted here; ``TR`` never returns it. And transactional
records (issue #18) are not in record batches at all: they live in store entries (kind 05)
that no reader may show, and become visible only at their commit's index, as ``(commit
index, k)``; a raw-log reader must skip the stores and, at a commit entry, fetch the
commit's records with ``TR`` reads from ``(commit index, 0)`` (the Spark source does), then
filter them with :meth:`TopicView.admits` like any record.

Fetch the view once per planned read (at the pinned applied index) and use it for every
index range of that read, so all tasks agree.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from raftlog.errors import TopicError
from raftlog.topics.records import Record, RecordId
from raftlog.topics.sync_client import SyncTopicClient
from raftlog.topics.wire import TopicInfo


@dataclass(frozen=True, slots=True)
class TopicBounds:
    """What decides which records of one topic are retained (from ``TD``)."""

    created_index: int
    low_water: RecordId
    log_clock_ms: int


@dataclass(frozen=True, slots=True)
class TopicView:
    """Retention and incarnation of some topics at one applied index."""

    topics: Mapping[str, TopicBounds]
    applied: int

    @classmethod
    def fetch(cls, client: SyncTopicClient, topics: Iterable[str] | None = None) -> TopicView:
        """The view of ``topics`` (None: every topic) from the leader. Topics that do not
        exist are simply absent: none of their records is admitted."""
        names = client.list_topics() if topics is None else sorted(set(topics))
        infos: list[TopicInfo] = []
        for name in names:
            try:
                infos.append(client.describe(name))
            except TopicError as exc:  # UnknownTopic: deleted between list and describe
                if exc.name != "UnknownTopic":
                    raise
        return cls.of(infos)

    @classmethod
    def of(cls, infos: Iterable[TopicInfo]) -> TopicView:
        """The view made of ``TD`` describe answers (for clients that fetch them their own
        way, e.g. on an asyncio loop)."""
        bounds: dict[str, TopicBounds] = {}
        applied = 0
        for info in infos:
            low = info.low_water or RecordId(info.created_index, 0)
            bounds[info.name] = TopicBounds(info.created_index, low, info.log_clock_ms)
            applied = max(applied, info.applied)
        return cls(bounds, applied)

    def admits(self, index: int, position: int, append_time_ms: int, record: Record) -> bool:
        """Would a ``TR`` read return this record (see the module docstring)?"""
        bounds = self.topics.get(record.topic)
        if bounds is None or index < bounds.created_index:
            return False
        if RecordId(index, position) < bounds.low_water:
            return False
        ttl = record.ttl_ms
        return ttl is None or append_time_ms + ttl > bounds.log_clock_ms

    def first_admitted(self, topic: str, index: int) -> int | None:
        """For records *without a TTL* of ``topic`` in the entry at ``index``: the first
        position admitted (every later one is too), or None when none is.

        Why: a columnar reader (the Spark source) checks an entry once per distinct topic
        instead of building a ``Record`` per record for :meth:`admits`; for records without
        their own TTL the two agree (incarnation and low-water mark only)."""
        bounds = self.topics.get(topic)
        if bounds is None or index < bounds.created_index:
            return None
        low = bounds.low_water
        if index > low.index:
            return 0
        if index < low.index:
            return None
        return low.position
