"""ZeroMQ frames -> Responses, as the DEALER receives them (docs/protocol.md §7-§11).

Why apart from :mod:`raftlog.rpc.responses`: that module writes the answers a peer sends
(the reply hot path); this one reads them, which only callers do -- clients, the admin
tool, and a peer's DEALERs to the other peers. A response is ``[id, frames...]``: frame 0
echoes the request's id byte for byte; responses carry neither the type nor the ident, so
the decoder must be told which request type was asked (the caller always knows).

Like the request decoders, :func:`decode_response` raises only
:class:`~raftlog.errors.RemoteProtocolError`; frame numbers count the id as frame 0.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Final

from raftlog.entry import REQUEST_ID_SIZE
from raftlog.errors import RemoteProtocolError
from raftlog.rpc.codec import CORE_TYPES, decode_entries
from raftlog.rpc.config import PeerListError, peers_from_json
from raftlog.rpc.frames import (
    decode_bool,
    decode_json,
    decode_nuint,
    decode_string,
    decode_uint,
    json_to_optional_str,
    json_to_uint,
)
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
    AppendEntriesResponse,
    ClientDispatchResponse,
    ConfigUpdateErrorInfo,
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
    SnapshotChunk,
    UpdateStatus,
)
from raftlog.rpc.ranges import check_peer_message
from raftlog.rpc.responses import PIPELINES_MARK

# --- decoders (frames exclude the id; numbering: this frame list's index + 1) ----------------


def _need(frames: Sequence[bytes], count: int, name: str) -> None:
    if len(frames) < count:
        raise RemoteProtocolError(
            f"{name} response needs {count} frames after the id, got {len(frames)}",
            len(frames) + 1,
        )


def _decode_vote(msg_id: bytes, frames: Sequence[bytes]) -> RequestVoteResponse:
    _need(frames, 2, "RequestVote")
    return check_peer_message(
        RequestVoteResponse(decode_uint(frames[0], 1), decode_bool(frames[1]))
    )


def _decode_append(msg_id: bytes, frames: Sequence[bytes]) -> AppendEntriesResponse:
    _need(frames, 2, "AppendEntries")
    term, success = decode_uint(frames[0], 1), decode_bool(frames[1])
    if success:
        # A success carries no hint: frames 4-5 (docs/protocol.md numbering) are a raftlog
        # follower's zeros before its pipelining mark in frame 6; the reference sends neither.
        marked = len(frames) > 4 and frames[4] == PIPELINES_MARK
        return check_peer_message(AppendEntriesResponse(term, True, None, marked))
    # Frame 4 is the next-index hint; an empty one is read as absent. Frame 5 (PROTO.md's
    # "conflict index", never sent by the reference) is ignored.
    hint = decode_nuint(frames[2], 3) if len(frames) > 2 else None
    return check_peer_message(AppendEntriesResponse(term, False, hint))


def _decode_snapshot(msg_id: bytes, frames: Sequence[bytes]) -> InstallSnapshotResponse:
    _need(frames, 1, "InstallSnapshot")
    offset = decode_nuint(frames[1], 2) if len(frames) > 1 else None
    return check_peer_message(InstallSnapshotResponse(decode_uint(frames[0], 1), offset))


def _request_id(msg_id: bytes) -> bytes:
    if len(msg_id) != REQUEST_ID_SIZE:
        raise RemoteProtocolError(f"request id must be {REQUEST_ID_SIZE} bytes", 0)
    return bytes(msg_id)


def _decode_update(msg_id: bytes, frames: Sequence[bytes]) -> RequestUpdateResponse:
    _need(frames, 1, "RequestUpdate")
    request_id = _request_id(msg_id)
    value = decode_json(frames[1], 2) if len(frames) > 1 else None
    if decode_bool(frames[0]):
        if value is None:  # [true] (or [true, nil]): accepted, keep waiting
            return RequestUpdateResponse(request_id, UpdateStatus.ACCEPTED)
        return RequestUpdateResponse(
            request_id, UpdateStatus.DONE, index=json_to_uint(value, 2, "log index")
        )
    if len(frames) == 1:
        return RequestUpdateResponse(request_id, UpdateStatus.EXPIRED)
    leader = json_to_optional_str(value, 2, "leader id")
    return RequestUpdateResponse(request_id, UpdateStatus.NOT_LEADER, leader_id=leader)


def _decode_error_info(value: object) -> ConfigUpdateErrorInfo:
    if not isinstance(value, dict):
        raise RemoteProtocolError("ConfigUpdate error must be a map", 2)
    name, message = value.get("name", ""), value.get("message", "")
    if not isinstance(name, str) or not isinstance(message, str):
        raise RemoteProtocolError("ConfigUpdate error name/message must be strings", 2)
    return ConfigUpdateErrorInfo(name, message)


def _decode_config_update(msg_id: bytes, frames: Sequence[bytes]) -> ConfigUpdateResponse:
    _need(frames, 1, "ConfigUpdate")
    request_id = _request_id(msg_id)
    code = decode_uint(frames[0], 1)
    if code > ConfigUpdateStatus.EXPIRED:
        raise RemoteProtocolError(f"unknown ConfigUpdate status {code}", 1)
    status = ConfigUpdateStatus(code)
    value = decode_json(frames[1], 2) if len(frames) > 1 else None
    if status is ConfigUpdateStatus.NOT_LEADER:
        leader = json_to_optional_str(value, 2, "leader id")
        return ConfigUpdateResponse(request_id, status, leader_id=leader)
    if status is ConfigUpdateStatus.OK:
        index = None if value is None else json_to_uint(value, 2, "log index")
        return ConfigUpdateResponse(request_id, status, index=index)
    if status is ConfigUpdateStatus.CONFIG_ERROR and len(frames) > 1:
        return ConfigUpdateResponse(request_id, status, error=_decode_error_info(value))
    return ConfigUpdateResponse(request_id, status)


def _decode_snapshot_chunk(frames: Sequence[bytes]) -> SnapshotChunk:
    _need(frames, 4, "RequestEntries snapshot")
    triple = decode_json(frames[1], 2)
    if not isinstance(triple, list) or len(triple) < 3:
        raise RemoteProtocolError("snapshot chunk info must be [offset, size, term]", 2)
    return SnapshotChunk(
        offset=json_to_uint(triple[0], 2, "chunk offset"),
        total_size=json_to_uint(triple[1], 2, "snapshot size"),
        term=json_to_uint(triple[2], 2, "snapshot term"),
        index=decode_uint(frames[2], 3),
        data=bytes(frames[3]),
    )


def _decode_entries(msg_id: bytes, frames: Sequence[bytes]) -> RequestEntriesResponse:
    _need(frames, 2, "RequestEntries")
    code = decode_uint(frames[0], 1)
    if code > EntriesStatus.SNAPSHOT:
        raise RemoteProtocolError(f"unknown RequestEntries status {code}", 1)
    status = EntriesStatus(code)
    if status is EntriesStatus.NOT_LEADER:
        leader = json_to_optional_str(decode_json(frames[1], 2), 2, "leader id")
        return RequestEntriesResponse(status, leader_id=leader)
    if status is EntriesStatus.SNAPSHOT:
        return RequestEntriesResponse(status, snapshot=_decode_snapshot_chunk(frames))
    # Status 1/2: frame 3 is nil by definition and its content is ignored, like the reference.
    _need(frames, 3, "RequestEntries")
    entries = decode_entries(frames[3:], 4) if len(frames) > 3 else ()
    return RequestEntriesResponse(status, last_index=decode_uint(frames[2], 3), entries=entries)


def _decode_config(msg_id: bytes, frames: Sequence[bytes]) -> RequestConfigResponse:
    _need(frames, 3, "RequestConfig")  # the reference client requires frame 4 too (§14.2)
    leader = json_to_optional_str(decode_json(frames[1], 2), 2, "leader id")
    try:
        peers = peers_from_json(decode_json(frames[2], 3))
    except PeerListError as exc:
        raise RemoteProtocolError(f"RequestConfig peers: {exc.message}", 3) from None
    return RequestConfigResponse(decode_bool(frames[0]), leader, peers)


def _decode_log_info(msg_id: bytes, frames: Sequence[bytes]) -> RequestLogInfoResponse:
    _need(frames, 9, "RequestLogInfo")
    return RequestLogInfoResponse(
        decode_bool(frames[0]),
        json_to_optional_str(decode_json(frames[1], 2), 2, "leader id"),
        *(decode_uint(frames[n - 1], n) for n in range(3, 10)),
    )


def _decode_broadcast_url(
    msg_id: bytes, frames: Sequence[bytes]
) -> RequestBroadcastStateUrlResponse:
    _need(frames, 1, "RequestBroadcastStateUrl")
    return RequestBroadcastStateUrlResponse(decode_string(frames[0], 1))


_ResponseDecoder = Callable[[bytes, Sequence[bytes]], Response]

_DECODERS: Final[dict[bytes, _ResponseDecoder]] = {
    TYPE_REQUEST_VOTE: _decode_vote,
    TYPE_APPEND_ENTRIES: _decode_append,
    TYPE_INSTALL_SNAPSHOT: _decode_snapshot,
    TYPE_REQUEST_CONFIG: _decode_config,
    TYPE_REQUEST_LOG_INFO: _decode_log_info,
    TYPE_REQUEST_UPDATE: _decode_update,
    TYPE_CONFIG_UPDATE: _decode_config_update,
    TYPE_REQUEST_ENTRIES: _decode_entries,
    TYPE_REQUEST_BROADCAST_STATE_URL: _decode_broadcast_url,
}
assert set(_DECODERS) == CORE_TYPES


def decode_response(request_type: bytes, frames: Sequence[bytes]) -> tuple[bytes, Response]:
    """``(id, response)`` of the answer to a request of ``request_type``.

    Any type without a message class of its own gives a :class:`ClientDispatchResponse` with
    the frames after the id. For RequestUpdate/ConfigUpdate the id must be 12 bytes.
    """
    if not frames:
        raise RemoteProtocolError("response has no frames")
    msg_id, rest = frames[0], frames[1:]
    decoder = _DECODERS.get(request_type)
    if decoder is None:
        return msg_id, ClientDispatchResponse(tuple(bytes(f) for f in rest))
    return msg_id, decoder(msg_id, rest)
