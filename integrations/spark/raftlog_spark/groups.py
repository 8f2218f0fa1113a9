"""A streaming query's stream group (``groupId``, like the Kafka source's group id; issue #31).

Why: Spark checkpoints a query's offsets where only that query sees them; a stream group
(``raftlog.topics.groups``, the stream-group contract) keeps a reader's position in the
cluster, replicated and in snapshots, where other consumers, the CLI and a new query see it.
A query with ``groupId``:

* starts, when it has no checkpoint, at the group's position: the least committed
  ``next_record`` over the read's topics (topics never committed fall in with it; with no
  position at all, ``startingOffsets`` applies). Offsets are log indexes, so a position in
  the middle of an entry (committed by another consumer) re-delivers that entry's earlier
  records: at least once, never a gap;
* commits ``next_record = (end offset + 1, 0)`` on each of its topics once a micro-batch is
  done -- every record up to the batch's last index is consumed. Spark reports that late:
  ``commit(end)`` of a batch comes only when the next one is planned, so the source also
  commits when Spark asks for the next offsets from a finished batch's end (``latestOffset``,
  which an ``availableNow`` query still calls after its last batch).

The group is created (mode ``stream``, the read's topics) when it does not exist; an existing
group must be a stream group that reads every topic of the query.

A batch read with ``groupId`` (:func:`batch_start`) starts at the same position -- pinned at
``load()`` like the read's end -- and commits nothing, as the Kafka source's batch reads do:
a batch read is a look at the data, not a consumer's progress (a job that wants to move the
group commits with ``raftlog-admin`` or a stream). It creates no group either.
"""

from __future__ import annotations

import fnmatch

from raftlog.errors import TopicError
from raftlog.topics.groups.model import GroupInfo
from raftlog.topics.records import RecordId
from raftlog_spark.errors import RaftlogSourceError
from raftlog_spark.logclient import LogClient

COMMIT_METADATA = "raftlog-spark"
"""The note on the source's commits (Kafka's offset metadata): who moved the position."""


class StreamGroup:
    """Group ``name``'s position on ``topics``, read and committed through ``client``."""

    def __init__(self, client: LogClient, name: str, topics: frozenset[str]) -> None:
        self._client = client
        self.name = name
        self.topics = tuple(sorted(topics))
        self.committed = -1
        """The last end offset committed (or started at): nothing is committed twice."""

    def start_offset(self) -> int | None:
        """The offset (last index consumed) to start a new query at; None: no position."""
        topics = self._client.topics
        info = self._client.call(
            topics.create_group(self.name, mode="stream", topics=self.topics, exist_ok=True)
        )
        found = _positions(info, self.name, self.topics)
        if not found:
            return None
        self.committed = min(found) - 1
        return self.committed

    def commit(self, end: int) -> None:
        """Every record up to index ``end`` is consumed, on each topic of the query."""
        if end <= self.committed:
            return
        topics = self._client.topics
        for topic in self.topics:
            self._client.call(
                topics.commit_group_position(
                    self.name, topic, RecordId(end + 1, 0), metadata=COMMIT_METADATA
                )
            )
        self.committed = end


def batch_start(client: LogClient, name: str, topics: frozenset[str]) -> int | None:
    """The first index a batch read with ``groupId`` reads: the group's least committed
    ``next_record`` index over ``topics``; None when the group does not exist or has no
    position on them (the read's starting options apply). Nothing is created or committed."""
    try:
        info = client.call(client.topics.describe_group(name))
    except TopicError as exc:
        if exc.name == "UnknownGroup":
            return None
        raise
    found = _positions(info, name, tuple(sorted(topics)))
    return min(found) if found else None


def _positions(info: GroupInfo, name: str, topics: tuple[str, ...]) -> list[int]:
    """The group's ``next_record`` indexes on ``topics`` (a clear error when it is no stream
    group, or does not read one of them)."""
    if info.mode != "stream":
        raise RaftlogSourceError(
            f"raftlog source: group {name!r} is a {info.mode} group; groupId needs a "
            "stream group (or a name not in use)"
        )
    unread = [
        t
        for t in topics
        if t not in info.topics
        and not (info.pattern is not None and fnmatch.fnmatchcase(t, info.pattern))
    ]
    if unread:
        raise RaftlogSourceError(
            f"raftlog source: group {name!r} does not read {', '.join(unread)} "
            f"(it reads {', '.join(info.topics) or info.pattern}); use another groupId"
        )
    return [info.positions[t].next_record.index for t in topics if t in info.positions]
