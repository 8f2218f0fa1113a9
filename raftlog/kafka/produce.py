"""Produce and InitProducerId: Kafka batches published as raftlog entries.

Each batch of a Produce request becomes one ``TP`` publish of its records (atomic, one log
entry) through the peer's cluster client, so the answer is sent once the entry is committed
and applied: fsynced on a majority. ``acks=-1`` (all) is that durable commit; ``acks=1`` is
served the same way (a raftlog leader has nothing weaker to acknowledge: an entry only on
its own disk is not yet a promise); ``acks=0`` publishes the same way and sends no answer,
as Kafka does. A plaintext cluster's ``[quotas]`` publish rate holds a batch until its
bucket admits it (Kafka throttles rather than refuses; ``throttle_time_ms`` reports it).
A connection's requests are handled one at a time in order (Kafka's rule
too), so the batches of one producer connection are appended in the order it sent them.

Idempotence: InitProducerId hands out ``producer id = seconds << 24 | 24 random bits`` (no
replicated state). A batch of an idempotent producer is published with the request id
``seconds | random bits | epoch | base sequence`` -- raftlog's request-id deduplication
(replicated in the log, so it holds across leader changes) then appends a retried batch at
most once and answers the retry with the first append's index. A producer id older than
half the cluster's ``request_id_ttl`` gets UNKNOWN_PRODUCER_ID, and the client asks for a
new one, before its request ids could age out of deduplication.
"""

from __future__ import annotations

import datetime
import secrets
import time
from typing import Any, Final

from kio.schema.errors import ErrorCode

from raftlog.errors import (
    ClusterUnavailableError,
    EntryTooLargeError,
    RequestExpiredError,
    TopicError,
)
from raftlog.kafka.batches import BatchError, ProducedBatch, decode_batches
from raftlog.kafka.context import KafkaContext
from raftlog.kafka.offsets import MAX_POSITION, offset_of
from raftlog.kafka.protocol import NO_THROTTLE, Request, make
from raftlog.security.policy import Role
from raftlog.topics.records import RecordFormatError, RecordId

TOPIC_ERRORS: Final = {
    "UnknownTopic": ErrorCode.unknown_topic_or_partition,
    "RecordTooLarge": ErrorCode.message_too_large,
    "EntryTooLarge": ErrorCode.message_too_large,
    "TooManyRecords": ErrorCode.message_too_large,  # max_records_per_entry
    "BadRecord": ErrorCode.invalid_record,
    "InvalidTopicName": ErrorCode.invalid_topic_exception,
}
"""raftlog ``TopicError`` names -> Kafka error codes (anything else: UNKNOWN_SERVER_ERROR
with the raftlog message)."""


def new_producer_id(now_s: int | None = None) -> int:
    """A fresh producer id: its issue time in the top bits (see the module docstring)."""
    seconds = int(time.time()) if now_s is None else now_s
    return (seconds & 0xFFFFFFFF) << 24 | secrets.randbits(24)


def batch_request_id(producer_id: int, epoch: int, base_sequence: int) -> bytes:
    """The request id of an idempotent producer's batch: the same for every retry of it,
    different for any other batch (of any producer id issued within the dedup window)."""
    return ((producer_id >> 24) & 0xFFFFFFFF).to_bytes(4, "big") + (
        producer_id & 0xFFFFFF).to_bytes(3, "big") + (epoch & 0xFF).to_bytes(
        1, "big") + (base_sequence & 0xFFFFFFFF).to_bytes(4, "big")


async def init_producer_id(ctx: KafkaContext, req: Request) -> Any:
    """InitProducerId for an idempotent producer; transactional ids are refused (Kafka
    transactions are not spoken: raftlog's own transactions are, natively)."""
    if not ctx.allowed(req.who, Role.WRITER):
        return make(req.schema, "InitProducerIdResponse", throttle_time=NO_THROTTLE,
                    error_code=ErrorCode.cluster_authorization_failed,
                    producer_id=-1, producer_epoch=-1)
    if req.body.transactional_id is not None:
        return make(req.schema, "InitProducerIdResponse", throttle_time=NO_THROTTLE,
                    error_code=ErrorCode.transactional_id_authorization_failed,
                    producer_id=-1, producer_epoch=-1)
    return make(req.schema, "InitProducerIdResponse", throttle_time=NO_THROTTLE,
                error_code=ErrorCode.none, producer_id=new_producer_id(), producer_epoch=0)


class RefusedError(Exception):
    """A batch refused before it reached the log: ``code`` is the Kafka answer."""

    def __init__(self, code: ErrorCode, message: str | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


async def _publish(ctx: KafkaContext, batch: ProducedBatch) -> RecordId:
    if len(batch.records) > MAX_POSITION:
        raise RefusedError(ErrorCode.message_too_large, "too many records in one batch")
    if batch.transactional:
        raise RefusedError(ErrorCode.invalid_record, "Kafka transactions are not supported")
    rid = None
    if batch.producer_id >= 0:
        ttl = ctx.request_id_ttl_ms
        issued = (batch.producer_id >> 24) & 0xFFFFFFFF
        if ttl is not None and time.time() - issued > ttl / 2000:
            raise RefusedError(ErrorCode.unknown_producer_id, "producer id too old: init again")
        rid = batch_request_id(batch.producer_id, batch.producer_epoch, batch.base_sequence)
    topics = ctx.gateway.topics
    for attempt in (1, 2):
        try:
            ids = await topics.publish_batch(batch.records, request_id=rid)
            return ids[0]
        except TopicError as exc:
            if exc.name == "UnknownTopic" and attempt == 1 and ctx.settings.auto_create_topics:
                await topics.create_topic(batch.records[0].topic, exist_ok=True)
                continue
            raise RefusedError(TOPIC_ERRORS.get(exc.name, ErrorCode.unknown_server_error),
                           str(exc)) from None
    raise AssertionError("unreachable")


async def _produce_partition(ctx: KafkaContext, req: Request, topic: str, part: Any,
                             throttled: list[float]) -> tuple[ErrorCode, int, str | None]:
    if not ctx.allowed(req.who, Role.WRITER, publish=topic):
        return ErrorCode.topic_authorization_failed, -1, "this client may not publish here"
    if part.index != 0:
        return ErrorCode.unknown_topic_or_partition, -1, "raftlog topics have one partition"
    if not ctx.is_leader():
        return ErrorCode.not_leader_or_follower, -1, None
    try:
        batches = decode_batches(bytes(part.records or b""), topic)
        first: RecordId | None = None
        for batch in batches:
            if not batch.records:
                continue
            size = sum(r.size for r in batch.records)
            if size > ctx.max_entry_bytes:
                raise RefusedError(ErrorCode.message_too_large,
                               f"batch of {size} bytes > max_log_entry_data_size")
            throttled[0] += await ctx.throttle(req.source, req.who, len(batch.records), size)
            got = await _publish(ctx, batch)
            first = got if first is None else first
        return ErrorCode.none, -1 if first is None else offset_of(first), None
    except BatchError as exc:
        return ErrorCode(exc.code), -1, str(exc)
    except RefusedError as exc:
        return exc.code, -1, exc.message
    except (EntryTooLargeError, RecordFormatError) as exc:
        code = ErrorCode.message_too_large if isinstance(exc, EntryTooLargeError) else (
            ErrorCode.invalid_record)
        return code, -1, str(exc)
    except RequestExpiredError as exc:
        return ErrorCode.unknown_producer_id, -1, str(exc)
    except ClusterUnavailableError as exc:  # retriable: the client refreshes metadata
        return ErrorCode.not_leader_or_follower, -1, str(exc)


async def produce(ctx: KafkaContext, req: Request) -> Any | None:
    """Produce (see the module docstring); None for ``acks=0`` (no answer is sent)."""
    schema = req.schema
    topics = []
    throttled = [0.0]
    for topic in req.body.topic_data:
        parts = []
        for part in topic.partition_data:
            code, base, message = await _produce_partition(ctx, req, topic.name, part,
                                                           throttled)
            parts.append(make(schema, "PartitionProduceResponse", index=part.index,
                              error_code=code, base_offset=base, log_append_time=None,
                              log_start_offset=-1, record_errors=(), error_message=message))
        topics.append(make(schema, "TopicProduceResponse", name=topic.name,
                           partition_responses=tuple(parts)))
    if req.body.acks == 0:
        return None
    return make(schema, "ProduceResponse", responses=tuple(topics),
                throttle_time=datetime.timedelta(seconds=throttled[0]))
