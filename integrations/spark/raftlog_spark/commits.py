"""The records a transaction commit makes visible, for a reader of the raw log (issue #18).

Why: a committed transaction's records do not sit in the commit entry (kind 04 ``commit``
holds only the transaction id). They were stored earlier, in kind 05 store entries that may
lie in another task's index range or be compacted out of the raw log (the peer's topic
index keeps copies where needed), and they become visible only at the commit, as ids
``(commit index, k)`` (docs/topics.md "Transactions"). The one authority on what a commit
holds is the peers' topic index, so :class:`CommitReader` asks it with ``TR`` reads starting
at ``(commit index, 0)``, one per topic the read admits, and keeps the records of that
commit only. A rolled-back, timed-out or still-open transaction has no commit entry (or an
aborted one the index never filled), so none of its records can show.

Since issue #31 this is the fallback of :mod:`raftlog_spark.commit_map`, which resolves a
partition's commits in bulk; it serves the commits that map does not cover. Cost: one
``TR`` round trip per topic of the read (those created before the commit and not
wholly removed by retention at it) per commit in a task's ranges -- cheap with a topic
filter, proportional to the number of topics without one.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Final

from raftlog.errors import RecordsExpiredError, TopicError
from raftlog.topics.client_view import TopicView
from raftlog.topics.records import LoggedRecord
from raftlog.topics.wire import MAX_READ_LIMIT
from raftlog_spark.errors import RaftlogSourceError
from raftlog_spark.logclient import RETRY_PAUSE, LogClient

READ_LIMIT: Final = MAX_READ_LIMIT


class CommitReader:
    """``records(commit index)``: the commit's records a ``TR`` read returns, filtered by the
    read's pinned :class:`TopicView` (the same rules the raw-log rows follow), ordered by
    position ``k``."""

    def __init__(
        self,
        client: LogClient,
        view: TopicView,
        wanted: Callable[[str], bool] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._client = client
        self._view = view
        self._wanted = wanted  # the read's topic filter (None: every topic of the view)
        self._clock = clock

    def records(self, index: int, stamp: int = 0) -> list[LoggedRecord]:
        """``stamp`` (the commit's append time) is unused: ``TR`` answers carry it."""
        view = self._view
        found: list[LoggedRecord] = []
        for topic, bounds in sorted(view.topics.items()):
            if self._wanted is not None and not self._wanted(topic):
                continue  # not a topic of this read (e.g. a topicPattern): no round trip
            if index < bounds.created_index or index < bounds.low_water.index:
                continue  # another incarnation, or removed by retention: nothing to ask
            found.extend(self._topic_records(topic, index))
        found.sort(key=lambda item: item.id.position)
        return [
            item
            for item in found
            if view.admits(item.id.index, item.id.position, item.append_time_ms, item.record)
        ]

    def _topic_records(self, topic: str, index: int) -> list[LoggedRecord]:
        """The records of ``topic`` at commit ``index``, paging through ``TR`` reads from the
        leader (whose applied index must have reached the commit: a new leader may lag)."""
        got: list[LoggedRecord] = []
        position = 0
        deadline = self._clock() + self._client.timeout
        topics = self._client.topics
        while True:
            try:
                result = self._client.call(
                    topics.read(topic, from_index=index, from_position=position, limit=READ_LIMIT)
                )
            except RecordsExpiredError as exc:  # retention removed a prefix meanwhile
                first_index, first_position = exc.first_available
                if first_index != index or first_position <= position:
                    return got
                position = first_position
                continue
            except TopicError as exc:
                if exc.name == "UnknownTopic":  # deleted since planning: none of its records
                    return got
                raise
            if result.applied < index:
                if self._clock() > deadline:
                    raise RaftlogSourceError(
                        f"raftlog source: the leader has not applied commit {index} within "
                        f"{self._client.timeout:g}s (applied {result.applied}); cannot read "
                        f"its records of topic {topic!r}"
                    )
                time.sleep(RETRY_PAUSE)
                continue
            at_commit = [item for item in result.records if item.id.index == index]
            got.extend(at_commit)
            if not at_commit or len(at_commit) < len(result.records) or not result.more:
                return got
            position = at_commit[-1].id.position + 1
