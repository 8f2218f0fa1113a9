"""The ROUTER dispatcher: one inbound message -> the handler of its type (docs/protocol.md §5.3).

Order of checks, as the reference: too few frames -> dropped; wrong cluster ident -> dropped
silently (debug log: a client with the wrong ident sees a timeout, §15.2); then the codec
decodes the arguments. Unlike the reference (§5.4) a malformed message never takes the peer
down: the codec raises ``RemoteProtocolError``, which is counted, logged and dropped, leaving
term and log untouched.

AppendEntries/InstallSnapshot are debounced per sending leader (§6): a message with the same
(routing id, msgid) as the last one processed is answered from the cached reply (or dropped
while the first copy is still being processed), because a reference leader retransmits the
identical message until it hears back.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Final

from raftlog.errors import RemoteProtocolError
from raftlog.rpc.codec import decode_request_args
from raftlog.rpc.config import peers_to_json
from raftlog.rpc.frames import encode_bool, encode_uint, pack_json
from raftlog.rpc.messages import (
    AppendEntries,
    ClientDispatch,
    ConfigUpdate,
    InstallSnapshot,
    PeerResponse,
    RequestBroadcastStateUrl,
    RequestConfig,
    RequestEntries,
    RequestLogInfo,
    RequestUpdate,
    RequestVote,
)
from raftlog.rpc.responses import encode_response
from raftlog.rpc.topics import TYPE_PUBLISH
from raftlog.server.topics_hook import TopicPublishHook

if TYPE_CHECKING:
    from raftlog.server.node import PeerNode

TYPE_COMPACT: Final = b"AC"
"""raftlog extension (two bytes, docs/protocol.md §10.6): compact the receiving peer's log now."""
HEADER_FRAMES: Final = 4
"""routing id, id, type, ident."""
MAX_DEBOUNCED_LEADERS: Final = 64
DEBUG_SAMPLE: Final = 100
"""Log one in this many repeated drops of the same kind (the counters keep them all)."""


class _PeerToken:
    """Identifies an inbound peer request so its reply can find the way back."""

    __slots__ = ("leader_id", "msg_id", "routing")

    def __init__(self, routing: bytes, msg_id: bytes, leader_id: str | None) -> None:
        self.routing = routing
        self.msg_id = msg_id
        self.leader_id = leader_id


class Dispatcher:
    def __init__(self, node: PeerNode) -> None:
        self._node = node
        self._ident = node.settings.ident.encode()
        self._max_data = node.settings.options.max_log_entry_data_size
        self._debounce: dict[str, tuple[bytes, bytes, list[bytes] | None]] = {}
        # topics (issue #7): the leader validates and stamps topic entries before proposing
        self.topics = TopicPublishHook(
            node, node.topics, auto_create=node.settings.options.topic_auto_create
        )

    def _drop(self, kind: str, **fields: object) -> None:
        stats = self._node.stats
        stats[kind] += 1
        if stats[kind] % DEBUG_SAMPLE == 1:
            self._node.log.warning(kind, count=stats[kind], **fields)

    def on_message(self, frames: list[bytes]) -> None:
        """Handle ``[routing, id, type, ident, args...]`` from the ROUTER."""
        if len(frames) < HEADER_FRAMES:
            self._drop("short_message_dropped", frames=len(frames))
            return
        routing, msg_id, msg_type, ident = frames[0], frames[1], frames[2], frames[3]
        if ident != self._ident:
            self._drop("wrong_ident_dropped", msg_type=msg_type[:8].hex())
            return
        if not msg_type:
            self._drop("empty_type_dropped")
            return
        try:
            message = decode_request_args(msg_type, msg_id, frames[HEADER_FRAMES:])
        except RemoteProtocolError as exc:
            self._drop("malformed_message_dropped", msg_type=msg_type[:8].hex(), reason=str(exc))
            return
        node = self._node
        core = node.core
        if isinstance(message, RequestUpdate):
            if len(message.data) > self._max_data:
                self._drop("oversized_update_ignored", size=len(message.data))
                return
            # topics (issue #7): stamp a topic entry, or ignore a refused one (no answer)
            prepared = self.topics.request_update(message)
            if prepared is not None:
                node.clients.request_update(routing, prepared, node.machine.last_applied)
        elif isinstance(message, AppendEntries | InstallSnapshot):
            if self._known_sender(message.leader_id):
                self._peer_request_debounced(routing, msg_id, message)
        elif isinstance(message, RequestVote):
            if self._known_sender(message.candidate_id):
                core.step_request(_PeerToken(routing, msg_id, None), message)
        elif isinstance(message, RequestEntries):
            node.entries.handle(
                routing,
                msg_id,
                message,
                leader=core.is_leader,
                leader_id=core.leader_id,
                applied=node.machine.last_applied,
                now=time.monotonic(),
            )
        elif isinstance(message, RequestConfig):
            node.reply(
                routing,
                [
                    msg_id,
                    encode_bool(core.is_leader),
                    pack_json(core.leader_id),
                    pack_json(peers_to_json(core.config.all_peers())),
                ],
            )
        elif isinstance(message, RequestLogInfo):
            self._log_info(routing, msg_id)
        elif isinstance(message, ConfigUpdate):
            node.clients.config_update(routing, message)
        elif isinstance(message, RequestBroadcastStateUrl):
            node.reply(routing, [msg_id, node.settings.pub_url.encode()])
        elif isinstance(message, ClientDispatch) and message.type == TYPE_PUBLISH:
            self.topics.publish(routing, msg_id, message.args)  # topics (issue #7)
        elif isinstance(message, ClientDispatch) and message.type == TYPE_COMPACT:
            # raftlog extension: compact this peer's log now (raftlog-admin compact); the
            # answer is the new snapshot index, or 0 when nothing could be compacted
            node.reply(routing, [msg_id, encode_uint(node.compact() or 0)])
        elif isinstance(message, ClientDispatch):
            answer = node.machine.handle_request(message.type, message.args)
            if answer is None:
                self._drop("unhandled_type_dropped", msg_type=message.type[:8].hex())
            else:
                node.reply(routing, [msg_id, *answer])

    def _known_sender(self, sender: str) -> bool:
        """§6: peer RPCs from ids outside the configuration are dropped without an answer --
        otherwise anyone who knows the ident could depose the leader with a huge term
        (RELIABILITY B5). While the configuration is unknown (right after a snapshot install)
        every sender is heard, or the peer could never learn it."""
        core = self._node.core
        if not core.config_known or any(p.id == sender for p in core.config.all_peers()):
            return True
        self._drop("unknown_sender_dropped", sender=sender[:64])
        return False

    def _log_info(self, routing: bytes, msg_id: bytes) -> None:
        node = self._node
        core = node.core
        store = node.store
        meta = node.snapshots.meta()
        oldest = store.oldest_request_index()
        prune_index = store.last_index if oldest is None else oldest - 1
        node.reply(
            routing,
            [
                msg_id,
                encode_bool(core.is_leader),
                pack_json(core.leader_id),
                encode_uint(core.term),
                encode_uint(store.first_index),
                encode_uint(node.machine.last_applied),
                encode_uint(core.commit_index),
                encode_uint(store.last_index),
                encode_uint(meta.size if meta is not None else 0),
                encode_uint(prune_index),
            ],
        )

    def _peer_request_debounced(
        self, routing: bytes, msg_id: bytes, message: AppendEntries | InstallSnapshot
    ) -> None:
        leader = message.leader_id
        last = self._debounce.get(leader)
        if last is not None and last[0] == routing and last[1] == msg_id:
            if last[2] is not None:
                self._node.stats["debounced_resend"] += 1
                self._node.reply(routing, last[2])
            return
        if last is None and len(self._debounce) >= MAX_DEBOUNCED_LEADERS:
            self._debounce.clear()  # bound memory against made-up leader ids
        self._debounce[leader] = (routing, msg_id, None)
        self._node.core.step_request(_PeerToken(routing, msg_id, leader), message)

    def send_peer_reply(self, token: object, message: PeerResponse) -> None:
        """Answer an inbound peer request (the core's ``SendReply``)."""
        if not isinstance(token, _PeerToken):
            raise TypeError(f"foreign reply token {token!r}")
        frames = encode_response(message, id=token.msg_id)
        if token.leader_id is not None:
            last = self._debounce.get(token.leader_id)
            if last is not None and last[0] == token.routing and last[1] == token.msg_id:
                self._debounce[token.leader_id] = (token.routing, token.msg_id, frames)
        self._node.reply(token.routing, frames)
