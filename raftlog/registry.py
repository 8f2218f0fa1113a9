"""The message registry: one row per request type a peer understands (issue #26).

Why one table: a request type used to live in about seven unlinked tables (the codecs, the
handler table, the permission table, the topic request chain, the docs) and nothing checked
that they agreed -- ``TC`` (topic counts) was missing from the permission table, so a
reader-role Spark job could not plan on a secure cluster, and ``TR`` reached its handler
only through the dispatcher's fallback. Every table now derives from these rows:

* ``server/services.py`` builds the handler table: ``route(row.message, <row.handler>)``;
* ``security/policy.py`` takes each type's permission from ``row.permission`` (a type not
  listed still needs ``admin``: refusing an unknown type to a writer is safe);
* ``security/guard.py`` applies the topic ACL named by ``row.acl``;
* the request codec: ``row.message`` is the class ``rpc.codec`` decodes the type to (a
  core message class, or ``ClientDispatch`` for raftlog's extensions) and ``row.decoder``
  the function it decodes the argument frames with; ``rpc/`` is a leaf and cannot import
  this module, so ``rpc.codec`` keeps its table and the tests check it against the rows
  (docs/architecture.md §2);
* ``docs/security.md``'s permission list is generated from :func:`permission_table` (a test
  checks the doc matches).

The registry imports only the wire package and the topic wire types: it is read by the
security policy, which everything else imports.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from raftlog.rpc.admin import TYPE_COMPACT, TYPE_DRAIN, TYPE_TAKE_LEADERSHIP
from raftlog.rpc.clock import TYPE_CLOCK
from raftlog.rpc.codec import REQUEST_DECODERS, ArgDecoder, dispatch_decoder
from raftlog.rpc.messages import (
    TYPE_APPEND_ENTRIES,
    TYPE_CONFIG_UPDATE,
    TYPE_INSTALL_SNAPSHOT,
    TYPE_REQUEST_BROADCAST_STATE_URL,
    TYPE_REQUEST_CONFIG,
    TYPE_REQUEST_ENTRIES,
    TYPE_REQUEST_LOG_INFO,
    TYPE_REQUEST_UPDATE,
    TYPE_REQUEST_VOTE,
    TYPE_REQUEST_WEBMONITOR_URL,
    AppendEntries,
    ClientDispatch,
    ConfigUpdate,
    InstallSnapshot,
    RequestBroadcastStateUrl,
    RequestConfig,
    RequestEntries,
    RequestLogInfo,
    RequestUpdate,
    RequestVote,
)
from raftlog.rpc.reads import TYPE_READ_INDEX
from raftlog.topics.groups.wire import TYPE_GROUP_DESCRIBE, TYPE_GROUP_LEASED, TYPE_GROUP_LIST
from raftlog.topics.wire import TYPE_DESCRIBE, TYPE_LIST, TYPE_PUBLISH, TYPE_READ
from raftlog.topics.wire_counts import TYPE_COUNTS
from raftlog.topics.wire_fetch import TYPE_FETCH
from raftlog.topics.wire_kv import TYPE_KV_GET, TYPE_KV_KEYS
from raftlog.topics.wire_tx import TYPE_TX_STATUS


class Permission(enum.Enum):
    """What a message type needs: a member's key (``peer``) or a client role."""

    PEER = "peer"
    READ = "read"
    WRITE = "write"
    ADMIN = "admin"


class AclScope(enum.Enum):
    """Which topic rights a client's request is checked against (``security/guard.py``),
    after its role."""

    NONE = "none"
    """No topic is involved (or only an admin may send it)."""
    RAW_LOG = "raw log"
    """Reads every topic's records at once: only a key with unrestricted ``read``."""
    PUBLISH = "publish"
    """Carries a log entry: its records' topics against ``publish``; a plain entry needs
    unrestricted ``publish``; a topic admin command needs role admin."""
    READ_TOPIC = "read topic"
    """Names one topic: against ``read``."""
    READ_TOPICS = "read topics"
    """Names a list of topics (none: every topic): each against ``read``."""
    LIST = "list filter"
    """Lists topics: the answer is filtered by ``read``."""
    OWNER = "owner"
    """About a transaction: only its owner or an admin (the actor is stamped in)."""
    GROUP = "consume group"
    """Names a consumer group: against ``consume`` (issue #27)."""


class Family(enum.Enum):
    """Whose message it is: the ØMQ RAFT protocol's own, raftlog's topic model, or
    raftlog's other extensions (invisible to reference peers and clients)."""

    RAFT = "raft"
    TOPIC = "topic"
    EXTENSION = "extension"


@dataclass(frozen=True, slots=True)
class MessageRow:
    """Everything the peer needs to know about one request type; every column but
    ``flush`` is required, so a row cannot be added half-filled."""

    code: bytes
    """The type frame."""
    name: str
    message: type
    """The class ``rpc.codec`` decodes it to (``ClientDispatch``: raftlog's extensions)."""
    decoder: ArgDecoder
    """The request decoder of its argument frames: a core type's own function in
    ``rpc.codec.REQUEST_DECODERS``, or ``rpc.codec.dispatch_decoder`` (frames kept for the
    handler, which decodes them with its wire module's ``decode_*_request``)."""
    handler: str
    """``"<service>.<method>"`` among the services ``server/services.py`` wires."""
    permission: Permission
    acl: AclScope
    family: Family
    summary: str
    """One line for the docs."""
    flush: str | None = None
    """``"<service>.<method>"`` that handles what ``handler`` only queued, or None (the
    handler acts at once). The dispatcher calls it before it dispatches a message of any
    other type and at the end of every ROUTER drain, so effects keep the arrival order and
    no other handler sees the queue. RequestUpdate queues: a drain's updates are proposed as
    one batch, with one id lookup and one append (issue #28)."""


_P, _R, _W, _A = Permission.PEER, Permission.READ, Permission.WRITE, Permission.ADMIN
_RAFT, _TOPIC, _EXT = Family.RAFT, Family.TOPIC, Family.EXTENSION
_core = REQUEST_DECODERS.__getitem__
"""A core type's decoder (a ``KeyError`` at import if the type has no message class)."""
_dispatch = dispatch_decoder
"""An extension type's decoder (refuses a core type at import)."""
_MACHINE: Final = "info.state_machine_request"
"""§10.6: the request goes to the state machine (the topic machine answers the topic reads)."""

ROWS: Final[tuple[MessageRow, ...]] = (
    MessageRow(TYPE_REQUEST_VOTE, "RequestVote", RequestVote,
        _core(TYPE_REQUEST_VOTE), "peers.request_vote",
        _P, AclScope.NONE, _RAFT, "election (members only, under their own id)"),
    MessageRow(TYPE_APPEND_ENTRIES, "AppendEntries", AppendEntries,
        _core(TYPE_APPEND_ENTRIES), "peers.from_leader",
        _P, AclScope.NONE, _RAFT, "replication (members only, under their own id)"),
    MessageRow(TYPE_INSTALL_SNAPSHOT, "InstallSnapshot", InstallSnapshot,
        _core(TYPE_INSTALL_SNAPSHOT), "peers.from_leader",
        _P, AclScope.NONE, _RAFT, "snapshot transfer (members only, under their own id)"),
    MessageRow(TYPE_REQUEST_CONFIG, "RequestConfig", RequestConfig,
        _core(TYPE_REQUEST_CONFIG), "info.request_config",
        _R, AclScope.NONE, _RAFT, "cluster membership and leader"),
    MessageRow(TYPE_REQUEST_LOG_INFO, "RequestLogInfo", RequestLogInfo,
        _core(TYPE_REQUEST_LOG_INFO), "info.request_log_info",
        _R, AclScope.NONE, _RAFT, "a peer's log bounds and state"),
    MessageRow(TYPE_REQUEST_ENTRIES, "RequestEntries", RequestEntries,
        _core(TYPE_REQUEST_ENTRIES), "entries.request_entries",
        _R, AclScope.RAW_LOG, _RAFT, "stream the raw log"),
    MessageRow(TYPE_REQUEST_BROADCAST_STATE_URL, "RequestBroadcastStateUrl",
        RequestBroadcastStateUrl,
        _core(TYPE_REQUEST_BROADCAST_STATE_URL), "info.broadcast_url",
        _R, AclScope.RAW_LOG, _RAFT, "the PUB broadcast of every entry"),
    MessageRow(TYPE_REQUEST_WEBMONITOR_URL, "RequestWebmonitorUrl", ClientDispatch,
        _dispatch(TYPE_REQUEST_WEBMONITOR_URL), _MACHINE,
        _R, AclScope.NONE, _RAFT, "the reference's web monitor (not served: dropped)"),
    MessageRow(TYPE_REQUEST_UPDATE, "RequestUpdate", RequestUpdate,
        _core(TYPE_REQUEST_UPDATE), "clients.request_update",
        _W, AclScope.PUBLISH, _RAFT, "append an entry (a topic entry is a publish)",
        flush="clients.propose_queued"),
    MessageRow(TYPE_CONFIG_UPDATE, "ConfigUpdate", ConfigUpdate,
        _core(TYPE_CONFIG_UPDATE), "clients.config_update",
        _A, AclScope.NONE, _RAFT, "change the membership"),
    MessageRow(TYPE_PUBLISH, "TopicPublish", ClientDispatch,
        _dispatch(TYPE_PUBLISH), "clients.publish",
        _W, AclScope.PUBLISH, _TOPIC, "publish records, topic admin, transaction entries"),
    MessageRow(TYPE_READ, "TopicRead", ClientDispatch,
        _dispatch(TYPE_READ), _MACHINE,
        _R, AclScope.READ_TOPIC, _TOPIC, "read a topic's records"),
    MessageRow(TYPE_FETCH, "TopicFetch", ClientDispatch,
        _dispatch(TYPE_FETCH), _MACHINE,
        _R, AclScope.READ_TOPIC, _TOPIC, "push fetch: a read that waits for min records/bytes, "
        "within a byte credit"),
    MessageRow(TYPE_DESCRIBE, "TopicDescribe", ClientDispatch,
        _dispatch(TYPE_DESCRIBE), _MACHINE,
        _R, AclScope.READ_TOPIC, _TOPIC, "a topic's properties and bounds"),
    MessageRow(TYPE_LIST, "TopicList", ClientDispatch,
        _dispatch(TYPE_LIST), _MACHINE,
        _R, AclScope.LIST, _TOPIC, "topic names (only those the key may read)"),
    MessageRow(TYPE_COUNTS, "TopicCounts", ClientDispatch,
        _dispatch(TYPE_COUNTS), _MACHINE,
        _R, AclScope.READ_TOPICS, _TOPIC, "record counts per index bucket (Spark planning)"),
    MessageRow(TYPE_TX_STATUS, "TransactionStatus", ClientDispatch,
        _dispatch(TYPE_TX_STATUS), _MACHINE,
        _R, AclScope.OWNER, _TOPIC, "a transaction's state (its owner or an admin)"),
    MessageRow(TYPE_KV_GET, "KeyValueGet", ClientDispatch,
        _dispatch(TYPE_KV_GET), _MACHINE,
        _R, AclScope.READ_TOPIC, _TOPIC, "a compacted topic's live value of one key"),
    MessageRow(TYPE_KV_KEYS, "KeyValueKeys", ClientDispatch,
        _dispatch(TYPE_KV_KEYS), _MACHINE,
        _R, AclScope.READ_TOPIC, _TOPIC, "a compacted topic's live keys with a prefix"),
    MessageRow(TYPE_GROUP_DESCRIBE, "GroupDescribe", ClientDispatch,
        _dispatch(TYPE_GROUP_DESCRIBE), _MACHINE,
        _R, AclScope.GROUP, _TOPIC, "a consumer group's state (positions, leases, counters)"),
    MessageRow(TYPE_GROUP_LIST, "GroupList", ClientDispatch,
        _dispatch(TYPE_GROUP_LIST), _MACHINE,
        _R, AclScope.NONE, _TOPIC, "the consumer group names the key may consume"),
    MessageRow(TYPE_GROUP_LEASED, "GroupLeased", ClientDispatch,
        _dispatch(TYPE_GROUP_LEASED), _MACHINE,
        _R, AclScope.GROUP, _TOPIC, "the records a queue group leased to a member"),
    MessageRow(TYPE_CLOCK, "Clock", ClientDispatch,
        _dispatch(TYPE_CLOCK), "clock.reading",
        _R, AclScope.NONE, _EXT, "the peer's cluster clock reading"),
    MessageRow(TYPE_READ_INDEX, "ReadIndex", ClientDispatch,
        _dispatch(TYPE_READ_INDEX), "reads.request_read_index",
        _R, AclScope.NONE, _EXT, "the leader's confirmed read index (linearizable reads)"),
    MessageRow(TYPE_COMPACT, "Compact", ClientDispatch,
        _dispatch(TYPE_COMPACT), "info.compact",
        _A, AclScope.NONE, _EXT, "compact the receiving peer's log now"),
    MessageRow(TYPE_TAKE_LEADERSHIP, "TakeLeadership", ClientDispatch,
        _dispatch(TYPE_TAKE_LEADERSHIP), "leadership.take_leadership",
        _A, AclScope.NONE, _EXT, "leader transfer to the receiving peer"),
    MessageRow(TYPE_DRAIN, "Drain", ClientDispatch,
        _dispatch(TYPE_DRAIN), "leadership.drain",
        _A, AclScope.NONE, _EXT, "move leadership away from the receiving peer"),
)
"""Every request type a raftlog peer understands, in docs order."""

BY_TYPE: Final[Mapping[bytes, MessageRow]] = {row.code: row for row in ROWS}
"""One lookup by the type frame."""


def permission_table() -> str:
    """The Markdown permission list of ``docs/security.md`` (generated, checked by a test)."""
    lines = [
        "| type | request | family | needs | topic rights | what |",
        "|---|---|---|---|---|---|",
    ]
    for row in ROWS:
        needs = "member key" if row.permission is Permission.PEER else row.permission.value
        lines.append(
           f"| `{row.code.decode()}` | {row.name} | {row.family.value} | {needs} "
           f"| {row.acl.value} | {row.summary} |"
        )
    lines.append(
        "| any other | — | — | admin | — | unknown to this table: refusing a writer is safe |"
    )
    return "\n".join(lines) + "\n"
