"""ApiVersions, Metadata and the topic admin APIs (CreateTopics, DeleteTopics,
DescribeConfigs) of the Kafka listener.

Metadata lists every peer with a ``kafka_url`` as a broker and names the Raft leader's
listener as the leader of each topic's one partition (all peers are its replicas and in
sync: a committed record is on a majority by definition). While no leader is known the
partition reports LEADER_NOT_AVAILABLE and clients ask again. Topic configs map onto the
topic properties: ``retention.ms`` = ``retention_ms``, ``retention.bytes`` = ``max_bytes``,
``max.message.bytes`` = ``max_record_bytes`` (-1: none).
"""

from __future__ import annotations

import uuid
from typing import Any, Final

from kio.schema.errors import ErrorCode

from raftlog.errors import TopicError
from raftlog.kafka.context import KafkaContext
from raftlog.kafka.metadata_encoding import encode_every_topic
from raftlog.kafka.protocol import (
    NO_THROTTLE,
    Request,
    api_version_table,
    make,
)
from raftlog.security.policy import Principal, Role
from raftlog.topics.records import TopicProperties

CONFIGS: Final = {
    "retention.ms": "retention_ms",
    "retention.bytes": "max_bytes",
    "max.message.bytes": "max_record_bytes",
}
"""Kafka topic config -> raftlog topic property."""
NO_TOPIC_ID: Final = uuid.UUID(int=0)
"""Topic ids (KIP-516) are not kept: the all-zero id is Kafka's "none"."""
TOPIC_RESOURCE: Final = 2
DEFAULT_CONFIG: Final = 5  # config_source DEFAULT_CONFIG
TOPIC_CONFIG: Final = 1  # config_source TOPIC_CONFIG
KEPT_METADATA: Final = 16
"""Encoded answers for every topic kept at most (per version, leader and reading rights)."""


async def api_versions(ctx: KafkaContext, req: Request) -> Any:
    """ApiVersions: the table of :data:`raftlog.kafka.protocol.SUPPORTED`."""
    schema = req.schema
    return make(schema, "ApiVersionsResponse", error_code=ErrorCode.none,
                api_keys=api_version_table(schema), throttle_time=NO_THROTTLE)


async def metadata(ctx: KafkaContext, req: Request) -> Any:
    """Metadata (see the module docstring); unknown topics are UNKNOWN_TOPIC_OR_PARTITION
    unless ``[kafka] auto_create_topics`` and the client allows it.

    An answer for every topic is encoded by ``raftlog.kafka.metadata_encoding`` and kept per
    version, leader and reading rights until the topic list changes: building and encoding
    it with kio for 50,000 topics took 0.6-1.0 s of this peer's Python (the listener shares
    the interpreter lock with the consensus loop), and four clients asking in a loop made
    the cluster elect every second or two (docs/performance.md §3, "Many topics")."""
    listed = await ctx.gateway.topics.list_topics(url=ctx.own_url)
    leader = ctx.leader_node()
    if req.body.topics is not None:
        return await _named(ctx, req, set(listed), leader)
    key = (req.version, leader, _reading_rights(ctx, req.who))
    kept = ctx.kept_metadata.get(key)
    if kept is not None and kept[0] == listed:
        return kept[1]
    names = [n for n in listed if ctx.allowed(req.who, Role.READER, read=n)]
    entry = _topic(req.schema, "", ErrorCode.none, _partitions(ctx, req.schema, leader))
    encoded = encode_every_topic(_response(ctx, req.schema, leader, ()), entry, names)
    if len(ctx.kept_metadata) >= KEPT_METADATA:
        ctx.kept_metadata.clear()
    ctx.kept_metadata[key] = (listed, encoded)
    return encoded


def _reading_rights(ctx: KafkaContext, who: Principal | None) -> object:
    """What an answer for every topic depends on of the client: nothing on a plaintext
    listener, its role and read filter on a secure one."""
    if not ctx.secure or who is None:
        return None
    return (who.role, who.read)


async def _named(ctx: KafkaContext, req: Request, existing: set[str], leader: int) -> Any:
    """The answer for the topics a request names (created first where allowed)."""
    schema = req.schema
    allow_create = getattr(req.body, "allow_auto_topic_creation", True)
    topics = []
    for name in (t.name for t in req.body.topics):
        error = ErrorCode.none
        if not ctx.allowed(req.who, Role.READER, read=name):
            error = ErrorCode.topic_authorization_failed
        elif name not in existing:
            error = ErrorCode.unknown_topic_or_partition
            if (name and ctx.settings.auto_create_topics and allow_create
                    and ctx.allowed(req.who, Role.ADMIN)):
                try:
                    await ctx.gateway.topics.create_topic(name, exist_ok=True)
                    error = ErrorCode.leader_not_available  # Kafka's answer to a new topic
                except TopicError:
                    error = ErrorCode.invalid_topic_exception
        partitions = _partitions(ctx, schema, leader) if error is ErrorCode.none else ()
        topics.append(_topic(schema, name, error, partitions))
    return _response(ctx, schema, leader, tuple(topics))


def _partitions(ctx: KafkaContext, schema: Any, leader: int) -> tuple[Any, ...]:
    """A topic's one partition: led by ``leader``'s broker, every broker a replica in sync."""
    nodes = tuple(b.node_id for b in ctx.brokers)
    return (make(
        schema, "MetadataResponsePartition",
        error_code=ErrorCode.none if leader >= 0 else ErrorCode.leader_not_available,
        partition_index=0, leader_id=leader, leader_epoch=-1, replica_nodes=nodes,
        isr_nodes=nodes, offline_replicas=()),)


def _topic(schema: Any, name: str, error: ErrorCode, partitions: tuple[Any, ...]) -> Any:
    return make(schema, "MetadataResponseTopic", error_code=error, name=name,
                topic_id=NO_TOPIC_ID, is_internal=False, partitions=partitions,
                topic_authorized_operations=-2147483648)


def _response(ctx: KafkaContext, schema: Any, leader: int, topics: tuple[Any, ...]) -> Any:
    brokers = tuple(make(schema, "MetadataResponseBroker", node_id=b.node_id, host=b.host,
                         port=b.port, rack=None) for b in ctx.brokers)
    return make(schema, "MetadataResponse", throttle_time=NO_THROTTLE, brokers=brokers,
                cluster_id=ctx.cluster_id, controller_id=leader, topics=topics,
                cluster_authorized_operations=-2147483648)


def _properties(configs: Any) -> dict[str, int | None]:
    props: dict[str, int | None] = {}
    for config in configs or ():
        prop = CONFIGS.get(config.name)
        if prop is None:
            raise TopicError("BadConfig", f"unsupported topic config {config.name!r} "
                             f"(supported: {', '.join(sorted(CONFIGS))})")
        value = None if config.value in (None, "-1") else int(config.value)
        props[prop] = value
    return props


async def create_topics(ctx: KafkaContext, req: Request) -> Any:
    """CreateTopics: one partition only (``num_partitions`` -1 or 1), configs as above."""
    schema = req.schema
    results = []
    for topic in req.body.topics:
        error, message = ErrorCode.none, None
        try:
            if not ctx.allowed(req.who, Role.ADMIN):
                error, message = ErrorCode.topic_authorization_failed, "needs role admin"
            elif topic.num_partitions not in (-1, 1):
                error, message = ErrorCode.invalid_partitions, "raftlog topics have one partition"
            else:
                props = _properties(topic.configs)
                if not req.body.validate_only:
                    await ctx.gateway.topics.create_topic(topic.name, properties=props)
        except TopicError as exc:
            error = {"TopicExists": ErrorCode.topic_already_exists,
                     "BadConfig": ErrorCode.invalid_config,
                     "InvalidProperty": ErrorCode.invalid_config,
                     "InvalidTopicName": ErrorCode.invalid_topic_exception}.get(
                exc.name, ErrorCode.invalid_request)
            message = str(exc)
        except ValueError as exc:  # a config value that is not an integer
            error, message = ErrorCode.invalid_config, str(exc)
        results.append(make(schema, "CreatableTopicResult", name=topic.name, error_code=error,
                            error_message=message, topic_config_error_code=0,
                            num_partitions=1, replication_factor=len(ctx.brokers) or 1,
                            configs=()))
    return make(schema, "CreateTopicsResponse", throttle_time=NO_THROTTLE,
                topics=tuple(results))


async def delete_topics(ctx: KafkaContext, req: Request) -> Any:
    """DeleteTopics (by name)."""
    schema = req.schema
    results = []
    for name in req.body.topic_names:
        error, message = ErrorCode.none, None
        try:
            if not ctx.allowed(req.who, Role.ADMIN):
                raise PermissionError(name)
            await ctx.gateway.topics.delete_topic(name)
        except PermissionError:
            error, message = ErrorCode.topic_authorization_failed, "needs role admin"
        except TopicError as exc:
            error = (ErrorCode.unknown_topic_or_partition if exc.name == "UnknownTopic"
                     else ErrorCode.invalid_request)
            message = str(exc)
        results.append(make(schema, "DeletableTopicResult", name=name, error_code=error,
                            error_message=message))
    return make(schema, "DeleteTopicsResponse", throttle_time=NO_THROTTLE,
                responses=tuple(results))


def _config_value(props: TopicProperties, prop: str) -> str:
    value = getattr(props, prop)
    return "-1" if value is None else str(value)


async def describe_configs(ctx: KafkaContext, req: Request) -> Any:
    """DescribeConfigs of topics (the three mapped configs); other resources: an error."""
    schema = req.schema
    results = []
    for res in req.body.resources:
        configs: list[Any] = []
        error, message = ErrorCode.none, None
        if res.resource_type != TOPIC_RESOURCE:
            error, message = ErrorCode.invalid_request, "only topic configs are described"
        elif not ctx.allowed(req.who, Role.READER, read=res.resource_name):
            error, message = ErrorCode.topic_authorization_failed, "may not read this topic"
        else:
            try:
                info = await ctx.gateway.topics.describe(res.resource_name, url=ctx.own_url)
                keys = res.configuration_keys or tuple(CONFIGS)
                for key in keys:
                    prop = CONFIGS.get(key)
                    if prop is None:
                        continue
                    value = getattr(info.properties, prop)
                    configs.append(make(
                        schema, "DescribeConfigsResourceResult", name=key,
                        value=_config_value(info.properties, prop), read_only=False,
                        config_source=DEFAULT_CONFIG if value is None else TOPIC_CONFIG,
                        is_default=value is None, is_sensitive=False, synonyms=(),
                        config_type=5, documentation=None))
            except TopicError as exc:
                error, message = ErrorCode.unknown_topic_or_partition, str(exc)
        results.append(make(schema, "DescribeConfigsResult", error_code=error,
                            error_message=message, resource_type=res.resource_type,
                            resource_name=res.resource_name, configs=tuple(configs)))
    return make(schema, "DescribeConfigsResponse", throttle_time=NO_THROTTLE,
                results=tuple(results))
