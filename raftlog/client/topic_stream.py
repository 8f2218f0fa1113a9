"""``subscribe``: the records of some topics, from an index, a time or the end, then live.

Built on :class:`~raftlog.client.Subscriber` (history with RequestEntries, then the leader's
broadcast, gaps filled), decoding topic entries on the client. A start *time* is turned into
a start index with the topic index (``TR`` reads ``from_time``): the log is time-ordered for
topic records (append times never decrease in log order), so every record of these topics at
or after that index has an append time >= T, and none before it does.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Literal, Protocol

from raftlog.client.client import RaftClient
from raftlog.client.models import IndexedEntry
from raftlog.client.subscriber import Subscriber
from raftlog.records import LoggedRecord, RecordBatch, RecordFormatError, RecordId, decode_entry
from raftlog.rpc.topics import ReadResult


class TopicClient(Protocol):
    """What ``subscribe`` needs of ``raftlog.client.topics.TopicClient`` (a Protocol, so this
    module and that one do not import each other)."""

    @property
    def raft_client(self) -> RaftClient:
        """The client whose connection the subscriber shares."""
        ...

    async def read(self, topic: str, *, from_time_ms: int | None = None, limit: int) -> ReadResult:
        """A ``TR`` read of ``topic`` from an append time."""
        ...


async def subscribe(
    topics_client: TopicClient,
    topics: Sequence[str],
    *,
    from_index: int | None = None,
    from_time_ms: int | None = None,
    start: Literal["beginning", "end"] = "beginning",
) -> AsyncIterator[LoggedRecord]:
    """Records of ``topics`` in log order: from record entry ``from_index`` (inclusive), from
    append time ``from_time_ms``, or from ``start`` ("beginning" or "end"); then live."""
    if from_index is not None and from_time_ms is not None:
        raise ValueError("give from_index or from_time_ms, not both")
    wanted = frozenset(topics)
    if not wanted:
        raise ValueError("subscribe needs at least one topic")
    after: int | Literal["end"]
    if from_time_ms is not None:
        after = await _index_before_time(topics_client, wanted, from_time_ms)
    elif from_index is not None:
        after = max(0, from_index - 1)
    else:
        after = 0 if start == "beginning" else "end"
    min_time = from_time_ms or 0
    async with Subscriber(topics_client.raft_client, from_index=after) as sub:
        async for item in sub:
            if not isinstance(item, IndexedEntry):
                continue
            try:
                entry = decode_entry(item.entry.data)
            except RecordFormatError:
                continue  # not applied by any peer either: skip it as they do
            if not isinstance(entry, RecordBatch):
                continue
            for position, record in enumerate(entry.records):
                if record.topic in wanted and entry.append_time_ms >= min_time:
                    yield LoggedRecord(RecordId(item.index, position), entry.append_time_ms, record)


async def _index_before_time(client: TopicClient, topics: frozenset[str], time_ms: int) -> int:
    """The index just before the first record of ``topics`` appended at or after
    ``time_ms``; the responder's applied index when there is none yet (start live there)."""
    first: int | None = None
    applied = 0
    for topic in sorted(topics):
        result = await client.read(topic, from_time_ms=time_ms, limit=1)
        applied = max(applied, result.applied)
        if result.records:
            index = result.records[0].id.index
            first = index if first is None else min(first, index)
    return applied if first is None else first - 1
