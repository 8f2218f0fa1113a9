"""Responses -> ZeroMQ frames, as a peer answers (docs/protocol.md §7-§11).

A response is ``[id, frames...]``: frame 0 echoes the request's id byte for byte; responses
carry neither the type nor the ident. Reading them (:func:`decode_response`, the DEALER side)
lives in :mod:`raftlog.rpc.response_decoders`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Final, TypeAlias

from raftlog.entry import entries_bytes
from raftlog.errors import LocalProtocolError
from raftlog.rpc.admin import CompactResponse, encode_compact_response
from raftlog.rpc.config import peers_to_json
from raftlog.rpc.denied import (
    AccessDenied,
    QuotaRefusal,
    encode_access_denied,
    encode_quota_refusal,
)
from raftlog.rpc.frames import (
    EMPTY_FRAME,
    JSON_NULL,
    TRUE_FRAME,
    encode_bool,
    encode_string,
    encode_uint,
    pack_json,
)
from raftlog.rpc.messages import (
    AppendEntriesResponse,
    ClientDispatchResponse,
    ConfigUpdateResponse,
    ConfigUpdateStatus,
    EntriesStatus,
    InstallSnapshotResponse,
    RequestBroadcastStateUrlResponse,
    RequestConfigResponse,
    RequestEntriesResponse,
    RequestLogInfoResponse,
    RequestUpdateResponse,
    RequestVoteResponse,
    Response,
    UpdateStatus,
)

#: Frame 6 of a raftlog follower's successful AppendEntries answer (docs/protocol.md §8, whose
#: frame numbers count the msgid as frame 1): the follower takes pipelined requests. Frames 4
#: and 5 before it are real integers (0), because the reference's leader decodes both as
#: ``uint`` and loses the whole answer on an empty one; it reads neither on a success and
#: ignores every frame after them.
PIPELINES_MARK: Final = b"raftlog:pipelines"
_SUCCESS_MARKED: Final = (TRUE_FRAME, encode_uint(0), encode_uint(0), PIPELINES_MARK)

# --- encoders ---------------------------------------------------------------------------------


def encode_update_done(index: int) -> list[bytes]:
    """The body of a RequestUpdate's final answer ``[true, index]``: what
    ``encode_reply_body(RequestUpdateResponse(rid, UpdateStatus.DONE, index=index))`` gives,
    without building the message -- a busy leader sends one per committed update."""
    return [TRUE_FRAME, pack_json(index)]


def _encode_update(msg: RequestUpdateResponse) -> list[bytes]:
    status = msg.status
    if status is UpdateStatus.ACCEPTED:
        return [TRUE_FRAME]
    if status is UpdateStatus.DONE:
        if msg.index is None:
            raise LocalProtocolError("RequestUpdate DONE needs an index")
        return encode_update_done(msg.index)
    if status is UpdateStatus.NOT_LEADER:
        return [EMPTY_FRAME, pack_json(msg.leader_id)]
    return [EMPTY_FRAME]  # EXPIRED


def _encode_config_update(msg: ConfigUpdateResponse) -> list[bytes]:
    status = ConfigUpdateStatus(msg.status)
    frames = [encode_uint(status)]
    if status is ConfigUpdateStatus.NOT_LEADER:
        frames.append(pack_json(msg.leader_id))
    elif status is ConfigUpdateStatus.OK and msg.index is not None:
        frames.append(pack_json(msg.index))
    elif status is ConfigUpdateStatus.CONFIG_ERROR:
        if msg.error is None:
            raise LocalProtocolError("ConfigUpdate CONFIG_ERROR needs error info")
        frames.append(pack_json({"name": msg.error.name, "message": msg.error.message}))
    return frames


def _encode_entries(msg: RequestEntriesResponse) -> list[bytes]:
    status = EntriesStatus(msg.status)
    if status is EntriesStatus.NOT_LEADER:
        return [encode_uint(status), pack_json(msg.leader_id)]
    if status is EntriesStatus.SNAPSHOT:
        chunk = msg.snapshot
        if chunk is None:
            raise LocalProtocolError("RequestEntries SNAPSHOT needs a snapshot chunk")
        triple = pack_json([chunk.offset, chunk.total_size, chunk.term])
        return [encode_uint(status), triple, encode_uint(chunk.index), chunk.data]
    if msg.last_index is None:
        raise LocalProtocolError("RequestEntries LAST/MORE needs last_index")
    frames = [encode_uint(status), JSON_NULL, encode_uint(msg.last_index)]
    frames.extend(entries_bytes(msg.entries))
    frames.extend(msg.raw_entries)
    return frames


def _encode_append(msg: AppendEntriesResponse) -> list[bytes]:
    if msg.success and msg.pipelines:
        return [encode_uint(msg.term), *_SUCCESS_MARKED]
    frames = [encode_uint(msg.term), encode_bool(msg.success)]
    if msg.next_index_hint is not None:
        frames.append(encode_uint(msg.next_index_hint))
    return frames


def _encode_vote(msg: RequestVoteResponse) -> list[bytes]:
    return [encode_uint(msg.term), encode_bool(msg.vote_granted)]


def _encode_snapshot(msg: InstallSnapshotResponse) -> list[bytes]:
    if msg.next_offset is None:
        return [encode_uint(msg.term)]
    return [encode_uint(msg.term), encode_uint(msg.next_offset)]


def _encode_config(msg: RequestConfigResponse) -> list[bytes]:
    return [
        encode_bool(msg.is_leader),
        pack_json(msg.leader_id),
        pack_json(peers_to_json(msg.peers)),
    ]


def _encode_log_info(msg: RequestLogInfoResponse) -> list[bytes]:
    return [
        encode_bool(msg.is_leader),
        pack_json(msg.leader_id),
        encode_uint(msg.term),
        encode_uint(msg.first_index),
        encode_uint(msg.last_applied),
        encode_uint(msg.commit_index),
        encode_uint(msg.last_index),
        encode_uint(msg.snapshot_size),
        encode_uint(msg.prune_index),
    ]


def _encode_broadcast_url(msg: RequestBroadcastStateUrlResponse) -> list[bytes]:
    return [encode_string(msg.url)]


def _encode_dispatch(msg: ClientDispatchResponse) -> list[bytes]:
    return list(msg.frames)


CoreReply: TypeAlias = Response | CompactResponse | AccessDenied | QuotaRefusal
"""Every answer this package can encode: the core responses and raftlog's topic-free
extensions. A topic answer (``raftlog.topics.wire_publish.PublishReply``) is added to the
table by the peer that sends it (``raftlog.server.replies``): this package knows no topic."""

REPLY_ENCODERS: Final[Mapping[type, Callable[[Any], list[bytes]]]] = {
    AppendEntriesResponse: _encode_append,
    RequestVoteResponse: _encode_vote,
    InstallSnapshotResponse: _encode_snapshot,
    RequestUpdateResponse: _encode_update,
    RequestEntriesResponse: _encode_entries,
    ConfigUpdateResponse: _encode_config_update,
    RequestConfigResponse: _encode_config,
    RequestLogInfoResponse: _encode_log_info,
    RequestBroadcastStateUrlResponse: _encode_broadcast_url,
    ClientDispatchResponse: _encode_dispatch,
    CompactResponse: encode_compact_response,
    AccessDenied: encode_access_denied,
    QuotaRefusal: encode_quota_refusal,
}
"""One lookup by exact type (the reply hot path: no chain of isinstance checks)."""


def encode_reply_body(msg: CoreReply) -> list[bytes]:
    """The frames after the id of any answer a peer sends (the sender puts the routing id
    and the echoed id in front without copying this list)."""
    encoder = REPLY_ENCODERS.get(type(msg))
    if encoder is None:
        raise LocalProtocolError(f"not a response: {type(msg).__name__}")
    return encoder(msg)


def encode_reply(msg_id: bytes, msg: CoreReply) -> list[bytes]:
    """``[id, frames...]`` of any answer a peer sends; ``msg_id`` is the request's id frame,
    echoed byte for byte."""
    return [msg_id, *encode_reply_body(msg)]


def encode_response(msg: CoreReply, *, id: bytes | None = None) -> list[bytes]:
    """``[id, frames...]``. ``id`` is the request's frame 1, echoed; it may be omitted only
    for RequestUpdate/ConfigUpdate responses, whose id is their ``request_id``."""
    if isinstance(msg, RequestUpdateResponse | ConfigUpdateResponse):
        if id is None:
            id = msg.request_id
    elif id is None:
        raise LocalProtocolError(f"{type(msg).__name__} needs the request's id frame")
    return encode_reply(id, msg)
