"""FindCoordinator, JoinGroup/SyncGroup/Heartbeat/LeaveGroup and OffsetCommit/OffsetFetch.

Membership is :class:`~raftlog.kafka.coordinator.Coordinator`'s soft state on the leader's
listener; committed offsets are durable: a Kafka group ``g`` is the raftlog **stream** group
``g`` (created on its first commit, reading every topic: pattern ``*``), and a committed
offset is the group's position on the topic -- the id of the next record to deliver, so a
native reader of the group and a Kafka consumer resume at the same record.
"""

from __future__ import annotations

import datetime
from typing import Any, Final

from kio.schema.errors import ErrorCode

from raftlog.errors import TopicError
from raftlog.kafka.context import KafkaContext
from raftlog.kafka.coordinator import assignments_of
from raftlog.kafka.offsets import offset_of, record_at
from raftlog.kafka.protocol import NO_THROTTLE, Request, make
from raftlog.security.policy import Role

ALL_TOPICS: Final = "*"
GROUP_ERRORS: Final = {"InvalidGroupName": ErrorCode.invalid_group_id,
                       "UnknownTopic": ErrorCode.unknown_topic_or_partition}


def _seconds(value: Any, default: float) -> float:
    if isinstance(value, datetime.timedelta):
        return max(value.total_seconds(), 0.001)
    return default


def _not_leader(ctx: KafkaContext) -> bool:
    if ctx.is_leader():
        return False
    ctx.coordinator.clear()
    return True


def _group_denied(ctx: KafkaContext, req: Request) -> bool:
    """Whether the client may not act in the request's group: role reader and the token's
    ``consume`` right on the group, as a REST or native consumer needs
    (``raftlog.security.group_acl``) -- the Kafka door reaches no other principal's group."""
    return not ctx.allowed(req.who, Role.READER, consume=req.body.group_id)


def _refused(ctx: KafkaContext, req: Request) -> ErrorCode | None:
    """Why this group request is not served here (None: it is): the group's rights
    (:func:`_group_denied`), and only the leader's listener coordinates."""
    if _group_denied(ctx, req):
        return ErrorCode.group_authorization_failed
    return ErrorCode.not_coordinator if _not_leader(ctx) else None


async def find_coordinator(ctx: KafkaContext, req: Request) -> Any:
    """FindCoordinator: the Raft leader's listener coordinates every group."""
    leader = ctx.leader_node()
    broker = next((b for b in ctx.brokers if b.node_id == leader), None)
    if broker is None:
        return make(req.schema, "FindCoordinatorResponse", throttle_time=NO_THROTTLE,
                    error_code=ErrorCode.coordinator_not_available, error_message=None,
                    node_id=-1, host="", port=-1)
    return make(req.schema, "FindCoordinatorResponse", throttle_time=NO_THROTTLE,
                error_code=ErrorCode.none, error_message=None, node_id=broker.node_id,
                host=broker.host, port=broker.port)


async def join_group(ctx: KafkaContext, req: Request) -> Any:
    """JoinGroup (``raftlog.kafka.coordinator``)."""
    body, schema = req.body, req.schema
    if (refusal := _refused(ctx, req)) is not None:
        return make(schema, "JoinGroupResponse", throttle_time=NO_THROTTLE,
                    error_code=refusal, generation_id=-1, protocol_type=None,
                    protocol_name=None, leader="", member_id=body.member_id, members=())
    session = _seconds(body.session_timeout, 45.0)
    result = await ctx.coordinator.join(
        body.group_id, body.member_id, instance_id=getattr(body, "group_instance_id", None),
        protocol_type=body.protocol_type,
        protocols={p.name: bytes(p.metadata) for p in body.protocols}, session_s=session,
        rebalance_s=_seconds(getattr(body, "rebalance_timeout", None), session))
    members = tuple(make(schema, "JoinGroupResponseMember", member_id=mid,
                         group_instance_id=iid, metadata=meta)
                    for mid, iid, meta in result.members)
    return make(schema, "JoinGroupResponse", throttle_time=NO_THROTTLE,
                error_code=result.error, generation_id=result.generation,
                protocol_type=result.protocol_type, protocol_name=result.protocol,
                leader=result.leader, skip_assignment=False,
                member_id=result.member_id or body.member_id, members=members)


async def sync_group(ctx: KafkaContext, req: Request) -> Any:
    """SyncGroup."""
    body = req.body
    if (refusal := _refused(ctx, req)) is not None:
        error, assignment = refusal, b""
    else:
        error, assignment = await ctx.coordinator.sync(
            body.group_id, body.generation_id, body.member_id, assignments_of(body))
    group = ctx.coordinator.groups.get(body.group_id)
    return make(req.schema, "SyncGroupResponse", throttle_time=NO_THROTTLE, error_code=error,
                protocol_type=None if group is None else group.protocol_type,
                protocol_name=None if group is None else group.protocol,
                assignment=assignment)


async def heartbeat(ctx: KafkaContext, req: Request) -> Any:
    """Heartbeat."""
    body = req.body
    error = _refused(ctx, req) or ctx.coordinator.heartbeat(
        body.group_id, body.generation_id, body.member_id)
    return make(req.schema, "HeartbeatResponse", throttle_time=NO_THROTTLE, error_code=error)


async def leave_group(ctx: KafkaContext, req: Request) -> Any:
    """LeaveGroup (one member before v3, a list from v3)."""
    body, schema = req.body, req.schema
    ids = [m.member_id for m in body.members] if hasattr(body, "members") else [body.member_id]
    if (refusal := _refused(ctx, req)) is not None:
        errors = [refusal for _ in ids]
    else:
        errors = [ctx.coordinator.leave(body.group_id, mid) for mid in ids]
    members = tuple(make(schema, "MemberResponse", member_id=mid, group_instance_id=None,
                         error_code=err) for mid, err in zip(ids, errors, strict=True)
                    ) if hasattr(schema, "MemberResponse") else ()
    top = errors[0] if len(errors) == 1 and not hasattr(body, "members") else (
        ErrorCode.not_coordinator if errors and errors[0] is ErrorCode.not_coordinator
        else ErrorCode.none)
    return make(schema, "LeaveGroupResponse", throttle_time=NO_THROTTLE, error_code=top,
                members=members)


async def offset_commit(ctx: KafkaContext, req: Request) -> Any:
    """OffsetCommit: each partition's offset becomes the stream group's position."""
    body, schema = req.body, req.schema
    generation = getattr(body, "generation_id_or_member_epoch",
                         getattr(body, "generation_id", -1))
    check = _refused(ctx, req) or ctx.coordinator.check_commit(
        body.group_id, generation, body.member_id)
    topics = []
    created = False
    for topic in body.topics:
        parts = []
        for part in topic.partitions:
            error = check
            if error is ErrorCode.none and part.partition_index != 0:
                error = ErrorCode.unknown_topic_or_partition
            if error is ErrorCode.none and not ctx.allowed(req.who, Role.READER,
                                                           read=topic.name):
                error = ErrorCode.topic_authorization_failed
            if error is ErrorCode.none:
                try:
                    if not created:
                        await ctx.gateway.topics.create_group(
                            body.group_id, mode="stream", pattern=ALL_TOPICS, exist_ok=True)
                        created = True
                    await ctx.gateway.topics.commit_group_position(
                        body.group_id, topic.name, record_at(max(part.committed_offset, 0)),
                        metadata=part.committed_metadata or "")
                except TopicError as exc:
                    error = GROUP_ERRORS.get(exc.name, ErrorCode.unknown_server_error)
            parts.append(make(schema, "OffsetCommitResponsePartition",
                              partition_index=part.partition_index, error_code=error))
        topics.append(make(schema, "OffsetCommitResponseTopic", name=topic.name,
                           partitions=tuple(parts)))
    return make(schema, "OffsetCommitResponse", throttle_time=NO_THROTTLE, topics=tuple(topics))


async def offset_fetch(ctx: KafkaContext, req: Request) -> Any:
    """OffsetFetch: the stream group's positions (-1 where it never committed)."""
    body, schema = req.body, req.schema
    denied = _group_denied(ctx, req)
    try:
        positions = {} if denied else await ctx.gateway.topics.group_positions(
            body.group_id, url=ctx.own_url)
    except TopicError:
        positions = {}
    positions = {t: p for t, p in positions.items()
                 if ctx.allowed(req.who, Role.READER, read=t)}  # others: never committed
    wanted = ([(t.name, tuple(t.partition_indexes)) for t in body.topics]
              if body.topics is not None else [(name, (0,)) for name in sorted(positions)])
    error = ErrorCode.group_authorization_failed if denied else ErrorCode.none
    topics = []
    for name, indexes in wanted:
        parts = []
        for index in indexes:
            pos = positions.get(name) if index == 0 else None
            parts.append(make(schema, "OffsetFetchResponsePartition", partition_index=index,
                              committed_offset=-1 if pos is None else offset_of(pos.next_record),
                              committed_leader_epoch=-1,
                              metadata=None if pos is None else pos.metadata,
                              error_code=error))
        topics.append(make(schema, "OffsetFetchResponseTopic", name=name,
                           partitions=tuple(parts)))
    return make(schema, "OffsetFetchResponse", throttle_time=NO_THROTTLE, topics=tuple(topics),
                error_code=error)
