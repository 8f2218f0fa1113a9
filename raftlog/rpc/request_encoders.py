"""Requests -> ZeroMQ frames, as a DEALER sends them (docs/protocol.md §5-§11).

Why apart from :mod:`raftlog.rpc.codec`: that module reads requests (what a peer's ROUTER
needs on every frame it takes in) and StateBroadcasts; this one writes them (what clients and
a peer's DEALERs to other peers need). One function per type, one lookup by exact type. The
checks both directions share -- the id frame's size, the core types, the leadership transfer
flag -- stay in the codec, which this module imports.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from raftlog.entry import entries_bytes
from raftlog.errors import LocalProtocolError, RemoteProtocolError
from raftlog.rpc.codec import CORE_TYPES, TRANSFER_FLAG, _check_id
from raftlog.rpc.config import peers_to_json
from raftlog.rpc.frames import encode_nuint, encode_string, encode_uint, pack_json
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
    AppendEntries,
    ClientDispatch,
    ConfigUpdate,
    InstallSnapshot,
    Request,
    RequestBroadcastStateUrl,
    RequestConfig,
    RequestEntries,
    RequestLogInfo,
    RequestUpdate,
    RequestVote,
)


def _encode_append_entries(msg: AppendEntries) -> tuple[bytes, list[bytes]]:
    args = [
        encode_string(msg.leader_id),
        encode_uint(msg.term),
        encode_uint(msg.prev_log_index),
        encode_uint(msg.prev_log_term),
        encode_uint(msg.commit_index),
    ]
    args += entries_bytes(msg.entries)
    return TYPE_APPEND_ENTRIES, args


def _encode_request_vote(msg: RequestVote) -> tuple[bytes, list[bytes]]:
    vote = [
        encode_string(msg.candidate_id),
        encode_uint(msg.term),
        encode_uint(msg.last_log_index),
        encode_uint(msg.last_log_term),
    ]
    return TYPE_REQUEST_VOTE, [*vote, TRANSFER_FLAG] if msg.transfer else vote


def _encode_install_snapshot(msg: InstallSnapshot) -> tuple[bytes, list[bytes]]:
    return TYPE_INSTALL_SNAPSHOT, [
        encode_string(msg.leader_id),
        encode_uint(msg.term),
        encode_uint(msg.last_included_index),
        encode_uint(msg.last_included_term),
        encode_uint(msg.offset),
        encode_uint(msg.total_size),
        msg.data,
    ]


def _encode_request_update(msg: RequestUpdate) -> tuple[bytes, list[bytes]]:
    if not msg.data:
        raise LocalProtocolError("RequestUpdate data must hold at least one byte")
    return TYPE_REQUEST_UPDATE, [msg.data]


def _encode_config_update(msg: ConfigUpdate) -> tuple[bytes, list[bytes]]:
    return TYPE_CONFIG_UPDATE, [pack_json(peers_to_json(msg.peers))]


def _encode_request_entries(msg: RequestEntries) -> tuple[bytes, list[bytes]]:
    args = [encode_uint(msg.prev_index)]
    if msg.min_index or msg.linearizable:  # frames 8-9 (issue #29), after frame 7
        offset = encode_uint(msg.snapshot_offset or 0)
        args += (encode_nuint(msg.count), offset, encode_uint(int(msg.any_peer)))
        args += (encode_uint(msg.min_index), encode_uint(int(msg.linearizable)))
    elif msg.any_peer:  # frame 6 must then be a valid uint: a reference peer reads it
        offset = encode_uint(msg.snapshot_offset or 0)
        args += (encode_nuint(msg.count), offset, encode_uint(1))
    elif msg.snapshot_offset is not None:
        args += (encode_nuint(msg.count), encode_uint(msg.snapshot_offset))
    elif msg.count is not None:
        args.append(encode_uint(msg.count))
    return TYPE_REQUEST_ENTRIES, args


def _encode_client_dispatch(msg: ClientDispatch) -> tuple[bytes, list[bytes]]:
    if not msg.type or msg.type in CORE_TYPES:
        raise LocalProtocolError(f"ClientDispatch type {msg.type!r} is empty or built-in")
    return msg.type, list(msg.args)


_ENCODERS: Final[dict[type, Callable[[Any], tuple[bytes, list[bytes]]]]] = {
    AppendEntries: _encode_append_entries,
    RequestVote: _encode_request_vote,
    InstallSnapshot: _encode_install_snapshot,
    RequestUpdate: _encode_request_update,
    ConfigUpdate: _encode_config_update,
    RequestEntries: _encode_request_entries,
    RequestConfig: lambda _msg: (TYPE_REQUEST_CONFIG, []),
    RequestLogInfo: lambda _msg: (TYPE_REQUEST_LOG_INFO, []),
    RequestBroadcastStateUrl: lambda _msg: (TYPE_REQUEST_BROADCAST_STATE_URL, []),
    ClientDispatch: _encode_client_dispatch,
}
"""The type frame and argument frames of each request class (one function per type)."""


def _request_type_and_args(msg: Request) -> tuple[bytes, list[bytes]]:
    encoder = _ENCODERS.get(type(msg))
    if encoder is None:
        raise LocalProtocolError(f"not a request: {type(msg).__name__}")
    return encoder(msg)


def encode_request(msg: Request, *, ident: bytes, id: bytes | None = None) -> list[bytes]:
    """Frames ``[id, type, ident, args...]`` as a DEALER sends them.

    ``id``: for peer RPCs the encoded msgid (see :func:`~raftlog.rpc.frames.encode_msg_id`);
    for RequestUpdate/ConfigUpdate it defaults to (and must equal) ``msg.request_id``; for
    other client RPCs it is the caller's request counter, echoed back in the response.
    """
    msg_type, args = _request_type_and_args(msg)
    if isinstance(msg, RequestUpdate | ConfigUpdate):
        if id is not None and id != msg.request_id:
            raise LocalProtocolError("the id frame of RequestUpdate/ConfigUpdate is request_id")
        id = msg.request_id
    elif id is None:
        raise LocalProtocolError(f"{type(msg).__name__} needs an explicit id frame")
    _check_local_id(msg_type, id)
    return [id, msg_type, ident, *args]


def _check_local_id(msg_type: bytes, msg_id: bytes) -> None:
    try:
        _check_id(msg_type, msg_id)
    except RemoteProtocolError as exc:
        raise LocalProtocolError(exc.reason) from None
