"""Request-id anchors of streaming writes, kept in the raftlog cluster (any checkpoint).

Why: the sink derives each entry's request id from an *anchor* (a time in seconds, which the
leader checks for freshness) and (write id, batch, partition, chunk); a replayed micro-batch
writes nothing twice only if it uses the anchor of its first attempt. Spark gives a Python
writer nothing from its checkpoint but the query id and the batch id (task-local
properties), and a Python worker cannot reach the checkpoint's file system (HDFS, S3); so
the anchors live in the cluster the sink writes to, like Kafka's consumer offsets: topic
``ANCHOR_TOPIC`` (created on first use with a retention of ``ANCHOR_RETENTION_MS``), one
record per (query, first batch): key = the query id, value = ``{"anchor": s, "from": b}``.

The rule for batch ``b`` of query ``q``, which every attempt of ``b`` applies alike:

* of the records of ``q`` with ``from <= b``, those with the greatest ``from``, and of them
  the first in log order (racing writers each publish one; the first committed wins, and
  a writer reads only once its own record is applied, so it sees that first one too);
* none (a new query, its records expired, or its anchor older than ``STALE_AFTER_S``, too
  old for new request ids): publish ``(now, b)`` and apply the rule again;
* the chosen anchor is older than ``RENEW_AFTER_S``: publish ``(now, b + 1)`` for the next
  batches -- never for ``b`` itself, which an earlier attempt may have written with the old
  anchor. Batch ``b + 1`` starts only once ``b`` is committed, after every such record.

So a replay uses the first attempt's anchor as long as the peers remember its request ids
(``request_id_ttl``, default 8 h) and the anchor is still fresh for entries not yet written
(``request_id_ttl`` minus the accept margin, counted from the anchor: at most
``RENEW_AFTER_S`` plus one batch older than the batch's first attempt).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Final

from raftlog.errors import TopicError
from raftlog.topics.records import LoggedRecord, Record
from raftlog_spark.errors import RaftlogSourceError
from raftlog_spark.logclient import LogClient

ANCHOR_TOPIC: Final = "_raftlog_spark_sink_anchors"
ANCHOR_RETENTION_MS: Final = 8 * 3600 * 1000
"""As long as the peers remember request ids by default: older anchors cannot help."""
RENEW_AFTER_S: Final = 3600
"""Anchors are renewed after an hour, so a replay up to ~6.5 h after a batch's first attempt
still finds the request ids fresh (accepted for 7 h 45 min by default)."""
STALE_AFTER_S: Final = 7 * 3600
"""Anchors this old are ignored (a new one is published): the leader refuses request ids
older than 7 h 45 min by default, so entries not yet written could not use them."""
READ_ATTEMPTS: Final = 50
"""Reads that may find the leader's state machine behind the anchor just published."""


def _parse(record: LoggedRecord, query: str) -> tuple[int, int, int] | None:
    """(from batch, log index, anchor) of one anchor record of ``query``, or None."""
    if record.record.key != query.encode():
        return None
    try:
        value = json.loads(record.record.value)
        anchor, first = int(value["anchor"]), int(value["from"])
    except (ValueError, TypeError, KeyError):
        return None  # not written by this module: ignored
    return first, record.id.index, anchor


def choose(records: list[LoggedRecord], query: str, batch: int, now: int) -> int | None:
    """The anchor of ``batch`` by the rule of the module doc (None: no record applies).
    Anchors older than ``STALE_AFTER_S`` are left out: ids made from them would be refused."""
    candidates = [
        p
        for r in records
        if (p := _parse(r, query)) is not None and p[0] <= batch and now - p[2] < STALE_AFTER_S
    ]
    if not candidates:
        return None
    top = max(first for first, _, _ in candidates)
    return min((index, anchor) for first, index, anchor in candidates if first == top)[1]


class AnchorStore:
    """The anchor records, read and written through one task's :class:`LogClient`."""

    def __init__(self, client: LogClient, clock: Callable[[], float] = time.time) -> None:
        self._client = client
        self._clock = clock

    def anchor(self, query: str, batch: int) -> int:
        """The anchor of (``query``, ``batch``); publishes one when none applies yet, and a
        renewal for later batches when it is old."""
        now = int(self._clock())
        chosen = choose(self._records(0), query, batch, now)
        if chosen is None:
            seen = self._publish(query, now, batch)
            chosen = choose(self._records(seen), query, batch, now)
            if chosen is None:  # cannot happen: our own record applies
                raise RaftlogSourceError("raftlog sink: the anchor just published is missing")
        if now - chosen > RENEW_AFTER_S:
            self._publish(query, now, batch + 1)
        return chosen

    def _publish(self, query: str, anchor: int, first: int) -> int:
        value = json.dumps({"anchor": anchor, "from": first}).encode()
        record = Record(ANCHOR_TOPIC, value, query.encode())
        topics = self._client.topics
        try:
            ids = self._client.call(topics.publish_batch([record]))
        except TopicError as exc:
            if exc.name != "UnknownTopic":
                raise
            self._client.call(
                topics.create_topic(ANCHOR_TOPIC, retention_ms=ANCHOR_RETENTION_MS, exist_ok=True)
            )
            ids = self._client.call(topics.publish_batch([record]))
        return int(ids[0].index)

    def _records(self, applied_at_least: int) -> list[LoggedRecord]:
        """Every anchor record, read from the leader once it has applied
        ``applied_at_least`` (what was just published)."""
        topics = self._client.topics
        for _ in range(READ_ATTEMPTS):
            out: list[LoggedRecord] = []
            start: tuple[int, int] | None = None
            try:
                while True:
                    read = (
                        topics.read(ANCHOR_TOPIC)
                        if start is None
                        else topics.read(
                            ANCHOR_TOPIC,
                            from_index=start[0],
                            from_position=start[1],
                            inclusive=False,
                        )
                    )
                    result = self._client.call(read)
                    out.extend(result.records)
                    if not result.more or not result.records:
                        break
                    last = result.records[-1].id
                    start = (last.index, last.position)
            except TopicError as exc:
                if exc.name != "UnknownTopic":
                    raise
                if not applied_at_least:
                    return []
                result = None
            if result is not None and result.applied >= applied_at_least:
                return out
            time.sleep(0.05)  # a new leader still applying: read again
        raise RaftlogSourceError(
            f"raftlog sink: the leader has not applied the anchor record {applied_at_least}"
        )
