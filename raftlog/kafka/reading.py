"""Fetch and ListOffsets: Kafka reads served from this peer's applied topic records.

Offsets are record ids (:mod:`raftlog.kafka.offsets`). A topic's bounds come from one
``TD`` describe of this peer: the *log start* is the first retained record's offset; the
*high watermark* is one past the last retained record, or -- for a topic that holds nothing
now -- the low-water mark retention left, or the first id after the topic's creation. None
of these ever moves back, and every record appended later has an offset at or above it, so
a consumer parked at the high watermark gets exactly the records that follow.

Fetch waits Kafka's way: when fewer than ``min_bytes`` are there it parks on the peer's
:class:`~raftlog.server.apply_signal.ApplySignal` (woken by the consensus thread after each
applied batch, no polling) until ``max_wait_ms`` passes. An offset below the log start is
OFFSET_OUT_OF_RANGE (the consumer applies ``auto.offset.reset``); one above the high
watermark answers no records rather than an error, since a peer that just took over may
not yet have applied what its predecessor served. Raftlog transactions reach the topic
index only when they commit, so ``read_committed`` and ``read_uncommitted`` consumers alike
see a transaction's records once committed, never before (last stable offset = high
watermark).

An answer's record bytes stay within the request's ``max_bytes`` and ``[kafka]
fetch_max_bytes`` (Kafka's rule: the first record of the first partition with any is sent
even when larger; later partitions then answer none), and within what the listener's
:class:`~raftlog.kafka.fetch_memory.FetchMemory` has room for: a partition read that finds
none is skipped this round.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Final

from kio.schema.errors import ErrorCode

from raftlog.errors import TopicError
from raftlog.kafka.batches import encode_batch, group_by_entry
from raftlog.kafka.context import KafkaContext
from raftlog.kafka.fetch_memory import READ_RESERVE
from raftlog.kafka.offsets import offset_of, record_at
from raftlog.kafka.protocol import NO_THROTTLE, Request, make
from raftlog.security.policy import Role
from raftlog.topics.records import RecordId
from raftlog.topics.wire import MAX_READ_LIMIT, MAX_READ_WAIT_MS

EARLIEST: Final = -2
LATEST: Final = -1
MAX_FETCH_WAIT_S: Final = MAX_READ_WAIT_MS / 1000


@dataclass(frozen=True, slots=True)
class Bounds:
    """A topic's Kafka bounds on this peer."""

    log_start: int
    high_watermark: int


async def bounds(ctx: KafkaContext, topic: str) -> Bounds:
    """The topic's bounds (``TopicError`` ``UnknownTopic`` when it does not exist)."""
    info = await ctx.gateway.topics.describe(topic, url=ctx.own_url)
    if info.last is not None:
        high = offset_of(info.last) + 1
    elif info.low_water is not None:
        high = offset_of(info.low_water)
    else:
        high = offset_of(RecordId(info.created_index + 1, 0))
    start = high if info.first is None else offset_of(info.first)
    return Bounds(start, high)


async def _offset_for_time(ctx: KafkaContext, topic: str, when_ms: int) -> int:
    result = await ctx.gateway.topics.read(topic, from_time_ms=when_ms, limit=1,
                                           url=ctx.own_url)
    return offset_of(result.records[0].id) if result.records else -1


async def list_offsets(ctx: KafkaContext, req: Request) -> Any:
    """ListOffsets: earliest (-2), latest (-1), or the first record appended at or after a
    time (by append time: the log's own order; -1 when none is)."""
    schema = req.schema
    topics = []
    for topic in req.body.topics:
        parts = []
        for part in topic.partitions:
            offset, error = -1, ErrorCode.none
            try:
                if not ctx.allowed(req.who, Role.READER, read=topic.name):
                    error = ErrorCode.topic_authorization_failed
                    raise PermissionError(topic.name)
                if part.partition_index != 0:
                    raise TopicError("UnknownTopic", "one partition per topic")
                ts = int(part.timestamp)
                if ts in (EARLIEST, LATEST):
                    found = await bounds(ctx, topic.name)
                    offset = found.log_start if ts == EARLIEST else found.high_watermark
                else:
                    offset = await _offset_for_time(ctx, topic.name, max(ts, 0))
            except TopicError:
                error = ErrorCode.unknown_topic_or_partition
            except PermissionError:
                pass
            parts.append(make(schema, "ListOffsetsPartitionResponse",
                              partition_index=part.partition_index, error_code=error,
                              timestamp=-1, offset=offset, leader_epoch=-1,
                              old_style_offsets=(offset,)))
        topics.append(make(schema, "ListOffsetsTopicResponse", name=topic.name,
                           partitions=tuple(parts)))
    return make(schema, "ListOffsetsResponse", throttle_time=NO_THROTTLE, topics=tuple(topics))


@dataclass(slots=True)
class _Part:
    topic: str
    partition: int
    offset: int
    max_bytes: int
    error: ErrorCode = ErrorCode.none
    high: int = -1
    start: int = -1
    records: bytes = b""


async def _read_part(ctx: KafkaContext, part: _Part, budget: int, *, first: bool) -> None:
    """Fill ``part``: its bounds, and records within ``budget`` bytes -- at least one
    batch when it is the ``first`` part with records in the answer, none when the budget
    is spent or the listener's fetch memory has no room."""
    try:
        if part.partition != 0:
            raise TopicError("UnknownTopic", "one partition per topic")
        found = await bounds(ctx, part.topic)
    except TopicError:
        part.error = ErrorCode.unknown_topic_or_partition
        return
    part.high, part.start = found.high_watermark, found.log_start
    if part.offset < found.log_start:
        part.error = ErrorCode.offset_out_of_range
        return
    if part.offset >= found.high_watermark or budget <= 0 or not ctx.fetch_memory.reserve():
        return
    chunks: list[bytes] = []
    size = 0
    try:
        start = record_at(part.offset)
        result = await ctx.gateway.topics.read(
            part.topic, from_index=start.index, from_position=start.position,
            limit=MAX_READ_LIMIT, url=ctx.own_url)
        limit = min(part.max_bytes, budget, READ_RESERVE)  # kept within what it reserved
        for items in group_by_entry(result.records):
            batch = encode_batch(items)
            if (chunks or not first) and size + len(batch) > limit:
                break  # Kafka returns at least one batch, then stays within the limits
            chunks.append(batch)
            size += len(batch)
    finally:
        ctx.fetch_memory.keep(size)
    part.records = b"".join(chunks)


async def fetch(ctx: KafkaContext, req: Request) -> Any:
    """Fetch: records from each partition's offset, waiting for ``min_bytes`` at most
    ``max_wait_ms`` (see the module docstring)."""
    body = req.body
    parts = [
        _Part(topic.topic, p.partition, p.fetch_offset, max(p.partition_max_bytes, 1))
        for topic in body.topics for p in topic.partitions
    ]
    wait_s = min(body.max_wait.total_seconds(), MAX_FETCH_WAIT_S)
    deadline = time.monotonic() + max(wait_s, 0.0)
    max_bytes = max(1, min(body.max_bytes if hasattr(body, "max_bytes") else 50 * 1024 * 1024,
                           ctx.settings.fetch_max_bytes))
    while True:
        applied = ctx.gateway.applied.applied
        ctx.fetch_memory.release_request()  # what an earlier round of this Fetch kept
        total = 0
        for part in parts:
            part.error, part.records = ErrorCode.none, b""
            if not ctx.allowed(req.who, Role.READER, read=part.topic):
                part.error = ErrorCode.topic_authorization_failed
                continue
            await _read_part(ctx, part, max_bytes - total, first=total == 0)
            total += len(part.records)
        failed = any(part.error is not ErrorCode.none for part in parts)
        remaining = deadline - time.monotonic()
        if failed or total >= max(body.min_bytes, 1) or remaining <= 0:
            break
        woken = await ctx.gateway.wait_applied(applied, remaining)
        if not woken and ctx.gateway.closing.is_set():
            break
    return _fetch_response(req, parts)


def _fetch_response(req: Request, parts: list[_Part]) -> Any:
    schema = req.schema
    by_topic: dict[str, list[Any]] = {}
    for part in parts:
        by_topic.setdefault(part.topic, []).append(make(
            schema, "PartitionData", partition_index=part.partition, error_code=part.error,
            high_watermark=part.high, last_stable_offset=part.high, log_start_offset=part.start,
            aborted_transactions=(), preferred_read_replica=-1, records=part.records))
    topics = tuple(make(schema, "FetchableTopicResponse", topic=name, partitions=tuple(ps))
                   for name, ps in by_topic.items())
    return make(schema, "FetchResponse", throttle_time=NO_THROTTLE, error_code=ErrorCode.none,
                session_id=0, responses=topics)
