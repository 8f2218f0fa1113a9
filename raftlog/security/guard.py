"""The per-request check of a CURVE peer: may this connection's key send this message?

Why per request and not only at the handshake: ZAP admits a key once per connection; roles
are finer (a reader may not publish) and the policy can change under an open connection
(SIGHUP revokes a key). libzmq attaches ZAP's User-Id (the z85 public key) to every message
received on the connection, so the check is one dict lookup per message against the policy
in force, before the dispatcher decodes anything.

A peer RPC (RequestVote, AppendEntries, InstallSnapshot) must come from a member's key *and*
name that member as its sender: a member cannot campaign or lead under another's id, and a
client key — even an admin's — cannot send peer RPCs at all.

The guard also writes who is asking where a handler needs it (issue #25), replacing
whatever the client put there: the actor (``[name, admin]``) of every transaction entry --
the begin's becomes the transaction's owner, and only the owner or an admin may use it
later -- and of a ``TS`` status request, and the key's read ACL as the filter of a ``TL``
topic listing, and the key's ``consume`` right as the filter of a ``GL`` group listing
(issue #27). Members are trusted to assert an actor (a peer's REST gateway acts for the
token's client) and are not rewritten.

A refusal is answered on the wire (``raftlog.rpc.denied``) so the client can tell "not
allowed" from "not answered", counted by reason, and logged once per (key, reason) at
warning level — a misconfigured client retrying in a loop must not flood the log.
"""

from __future__ import annotations

import contextlib
from typing import Final

import structlog

from raftlog.metrics import Counter
from raftlog.registry import BY_TYPE, ROWS, AclScope
from raftlog.rpc.messages import PEER_RPC_TYPES, TYPE_REQUEST_UPDATE
from raftlog.security import group_acl
from raftlog.security.policy import PolicyHolder, Principal, Role
from raftlog.topics.groups.entry import KIND_GROUP, GroupCommand
from raftlog.topics.groups.wire import TYPE_GROUP_LIST
from raftlog.topics.records import RecordBatch, TopicCommand, TopicError
from raftlog.topics.records_tx import (
    KIND_TX,
    KIND_TX_STORE,
    Actor,
    TxStore,
    decode_any_entry,
    with_actor,
)
from raftlog.topics.wire import (
    TYPE_LIST,
    TYPE_PUBLISH,
    TYPE_READ,
    decode_describe_request,
    decode_read_request,
    encode_list_request,
)
from raftlog.topics.wire_counts import decode_counts_request
from raftlog.topics.wire_fetch import TYPE_FETCH, decode_fetch_request
from raftlog.topics.wire_tx import TYPE_TX_STATUS, encode_status_request

RAW_LOG_TYPES: Final = frozenset(row.code for row in ROWS if row.acl is AclScope.RAW_LOG)
"""Reads of the whole log: every topic's records, so not for a key limited to some topics
(the registry's ``RAW_LOG`` rows)."""

log = structlog.get_logger("raftlog.security")

TYPE_FRAME: Final = 2
"""routing id, msgid, type, ident, args…: where the message type is."""
SENDER_FRAME: Final = 4
"""The first argument of every peer RPC: the sender's peer id."""
MAX_LOGGED: Final = 1024
"""Distinct (key, reason) pairs logged before the guard only counts (bounded memory)."""


class RequestGuard:
    """Decides, for each inbound ROUTER message of a secure peer, whether it may pass."""

    def __init__(self, holder: PolicyHolder, refused: Counter, *, owner: str) -> None:
        self.holder = holder
        self._owner = owner
        self._refused = refused
        """``raftlog_access_refused{reason}``: unknown_key, role, peer_impersonation."""
        self._logged: set[tuple[str, str]] = set()

    def refusal(self, frames: list[bytes], user_id: str | None) -> str | None:
        """None to let the message through (``frames`` possibly rewritten in place: see the
        module docstring), else a one-line reason to send back."""
        principal = self.holder.current.principal(user_id.encode()) if user_id else None
        if principal is None:
            return self._refuse("unknown_key", user_id or "-", "key not allowed (revoked?)")
        msg_type = frames[TYPE_FRAME] if len(frames) > TYPE_FRAME else b""
        reason = principal.refusal(msg_type)
        if reason is not None:
            return self._refuse("role", user_id or "-", reason)
        if msg_type in PEER_RPC_TYPES:
            claimed = frames[SENDER_FRAME] if len(frames) > SENDER_FRAME else b""
            if principal.peer_id is None or claimed != principal.peer_id.encode():
                return self._refuse(
                    "peer_impersonation",
                    user_id or "-",
                    f"{principal.name} may not speak for peer "
                    f"{claimed.decode('utf-8', 'replace')!r}",
                )
            return None
        if principal.peer_id is None:
            reason = topic_refusal(principal, msg_type, frames[SENDER_FRAME:])
            if reason is not None:
                return self._refuse("topic_acl", user_id or "-", reason)
            stamp_principal(principal, msg_type, frames)
        return None

    def _refuse(self, kind: str, key: str, reason: str) -> str:
        self._refused.labels(reason=kind).inc()
        if (key, reason) not in self._logged and len(self._logged) < MAX_LOGGED:
            self._logged.add((key, reason))
            log.warning("request_refused", peer=self._owner, kind=kind, client_key=key,
                        reason=reason)
        return reason

    def policy_reloaded(self) -> None:
        """Forget which refusals were logged: after a reload each may mean something new."""
        self._logged.clear()


def topic_refusal(principal: Principal, msg_type: bytes, args: list[bytes]) -> str | None:
    """Why a client's request breaks its topic rights, or None.

    Topic admin commands (create/update/delete, carried in an update) need ``admin``; a key
    limited to some topics publishes only topic records to those topics (no plain updates)
    and reads only through topic reads of those topics (not the raw log or the broadcast,
    which carry every topic). A transactional store is checked like a publish of its records
    (issue #18); begin, commit and rollback carry no records and need only the writer role.
    Requests this cannot decode pass: their handler answers them with the precise error."""
    row = BY_TYPE.get(msg_type)
    acl = AclScope.NONE if row is None else row.acl
    if acl is AclScope.PUBLISH:
        return _publish_refusal(principal, args[0] if args else b"")
    if acl is AclScope.GROUP:  # issue #27
        return group_acl.request_refusal(principal, msg_type, args)
    if principal.read.unrestricted:
        return None
    if acl is AclScope.RAW_LOG:
        return f"{principal.name} may read only some topics: use topic reads, not the raw log"
    try:
        if acl is AclScope.READ_TOPIC:
            topics: tuple[str, ...] | None = (
                (decode_read_request(args).topic,)
                if msg_type == TYPE_READ
                else (decode_fetch_request(args).read.topic,)
                if msg_type == TYPE_FETCH
                else (decode_describe_request(args[:1]),)  # TD, KG, KK: the topic first
            )
        elif acl is AclScope.READ_TOPICS:
            topics = decode_counts_request(args).topics
        else:
            return None
    except TopicError:
        return None
    if topics is None:  # every topic: only for a key that may read every topic
        return f"{principal.name} may read only some topics: name them"
    for topic in topics:
        if not principal.may_read(topic):
            return f"{principal.name} may not read topic {topic!r}"
    return None


def actor_of(principal: Principal) -> Actor:
    """The actor a client principal's transaction entries and status requests carry."""
    return Actor(principal.name, principal.role is not None and principal.role >= Role.ADMIN)


def stamp_principal(principal: Principal, msg_type: bytes, frames: list[bytes]) -> None:
    """Write who asks into a client's request, in place (the module docstring): the actor
    of a transaction entry (``TP`` or a plain update) or of ``TS``, the read ACL of ``TL``.
    A malformed request is left alone: its handler answers it with the precise error."""
    if msg_type in (TYPE_REQUEST_UPDATE, TYPE_PUBLISH):
        if len(frames) > SENDER_FRAME:
            data = frames[SENDER_FRAME]
            if len(data) > 5 and data[5] in (KIND_TX, KIND_TX_STORE):
                with contextlib.suppress(TopicError):  # malformed: the topic gate refuses it
                    frames[SENDER_FRAME] = with_actor(data, actor_of(principal))
            elif len(data) > 5 and data[5] == KIND_GROUP:  # a lease reads what the key may
                frames[SENDER_FRAME] = group_acl.with_read_filter(principal, data)
    elif msg_type == TYPE_TX_STATUS:
        if len(frames) > SENDER_FRAME:
            try:
                txid = frames[SENDER_FRAME].decode()
                args = encode_status_request(txid, actor_of(principal))
            except (UnicodeDecodeError, TopicError):
                return
            frames[SENDER_FRAME:] = args
    elif msg_type == TYPE_LIST and not principal.read.unrestricted:
        patterns = [*sorted(principal.read.exact), *(p + "*" for p in principal.read.prefixes)]
        frames[SENDER_FRAME:] = encode_list_request(patterns)
    elif msg_type == TYPE_GROUP_LIST and (listed := group_acl.list_filter(principal)):
        frames[SENDER_FRAME:] = listed


def _publish_refusal(principal: Principal, data: bytes) -> str | None:
    try:
        entry = decode_any_entry(data)
    except TopicError:
        return None  # the topic gate answers a malformed entry itself
    if entry is None:
        if principal.publish.unrestricted:
            return None
        return f"{principal.name} may publish only to some topics, not plain updates"
    if isinstance(entry, GroupCommand):
        return group_acl.command_refusal(principal, entry)
    if isinstance(entry, TopicCommand):
        if principal.role is not None and principal.role >= Role.ADMIN:
            return None
        return f"{principal.name}: topic {entry.op} needs role admin"
    if isinstance(entry, RecordBatch | TxStore) and not principal.publish.unrestricted:
        for record in entry.records:
            if not principal.may_publish(record.topic):
                return f"{principal.name} may not publish to topic {record.topic!r}"
    return None
