"""ZeroMQ frames -> Requests, and StateBroadcasts <-> frames (docs/protocol.md §5-§11).

Frames are shown as the DEALER sends them: ``[id, type, ident, args...]`` (the ROUTER sees a
routing-id frame first; strip it before calling :func:`decode_request`). Requests are
encoded by :mod:`raftlog.rpc.request_encoders`; responses live in :mod:`raftlog.rpc.responses`.

Decoding is split so that a router can stay cheap on hostile or foreign traffic:
:func:`split_header` returns ``(id, type, ident)`` without touching the arguments, the caller
compares the ident (``hmac.compare_digest``) and only then pays for
:func:`decode_request_args`. :func:`decode_request` does both in one call.

Every decoder raises :class:`~raftlog.errors.RemoteProtocolError` and nothing else on bad
input (peer RPCs whose term or index is above the ceiling of :mod:`raftlog.bounds` raise its
subclass :class:`~raftlog.rpc.ranges.OutOfRangeError`); ``frame`` in the error is the
0-based index in ``[id, type, ident, args...]``.
Trailing frames beyond a type's definition are ignored (except AppendEntries/StateBroadcast
entries and ClientDispatch arguments), like the reference.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from raftlog.entry import REQUEST_ID_SIZE, LogEntry, entries_bytes, parse_entries
from raftlog.errors import EntryFormatError, LocalProtocolError, RemoteProtocolError
from raftlog.rpc.config import PeerListError, peers_from_json
from raftlog.rpc.frames import (
    decode_entry,
    decode_json,
    decode_nuint,
    decode_string,
    decode_uint,
    encode_uint,
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
    StateBroadcast,
)
from raftlog.rpc.ranges import check_peer_message

ARGS_FRAME: Final = 3
"""Index of the first argument frame in ``[id, type, ident, args...]``."""

MSG_ID_TYPES: Final = frozenset({TYPE_REQUEST_VOTE, TYPE_APPEND_ENTRIES, TYPE_INSTALL_SNAPSHOT})
"""Types whose id frame must be a 1-3 byte peer msgid."""

REQUEST_ID_TYPES: Final = frozenset({TYPE_REQUEST_UPDATE, TYPE_CONFIG_UPDATE})
"""Types whose id frame must be a 12-byte request id."""

CORE_TYPES: Final = MSG_ID_TYPES | {
    TYPE_REQUEST_CONFIG,
    TYPE_REQUEST_LOG_INFO,
    TYPE_REQUEST_UPDATE,
    TYPE_CONFIG_UPDATE,
    TYPE_REQUEST_ENTRIES,
    TYPE_REQUEST_BROADCAST_STATE_URL,
}
"""Types with a message class of their own; every other non-empty type is a ClientDispatch."""


@dataclass(frozen=True, slots=True)
class DecodedRequest:
    """A decoded request plus the header frames the transport needs to answer it."""

    id: bytes
    type: bytes
    ident: bytes
    message: Request


# --- header ----------------------------------------------------------------------------------


def split_header(frames: Sequence[bytes]) -> tuple[bytes, bytes, bytes]:
    """``(id, type, ident)`` of a request, checking only what the header itself needs."""
    if len(frames) < ARGS_FRAME:
        raise RemoteProtocolError(f"request has {len(frames)} frames, at least 3 are needed")
    msg_type = frames[1]
    if not msg_type:
        raise RemoteProtocolError("empty message type", 1)
    return frames[0], msg_type, frames[2]


def _check_id(msg_type: bytes, msg_id: bytes) -> None:
    if msg_type in MSG_ID_TYPES:
        if not 1 <= len(msg_id) <= 3:
            raise RemoteProtocolError(f"peer msgid must be 1-3 bytes, got {len(msg_id)}", 0)
    elif msg_type in REQUEST_ID_TYPES and len(msg_id) != REQUEST_ID_SIZE:
        raise RemoteProtocolError(
            f"request id must be {REQUEST_ID_SIZE} bytes, got {len(msg_id)}", 0
        )


def _need(args: Sequence[bytes], count: int, name: str) -> None:
    if len(args) < count:
        raise RemoteProtocolError(
            f"{name} needs {count} argument frames, got {len(args)}", ARGS_FRAME + len(args)
        )


TRANSFER_FLAG: Final = encode_uint(1)
"""Frame 8 (docs/protocol.md §7) of a RequestVote sent by the target of a leadership
transfer (raftlog only)."""


# --- argument decoders (frame numbers: argument i is frame 3 + i) -----------------------------


def _decode_request_vote(msg_id: bytes, args: Sequence[bytes]) -> RequestVote:
    _need(args, 4, "RequestVote")
    return check_peer_message(
        RequestVote(
            decode_string(args[0], 3),
            decode_uint(args[1], 4),
            decode_uint(args[2], 5),
            decode_uint(args[3], 6),
            transfer=len(args) > 4 and args[4] == TRANSFER_FLAG,
        )
    )


def decode_entries(frames: Sequence[bytes], first_frame_no: int) -> tuple[LogEntry, ...]:
    """Entry frames; the common all-valid case runs without a per-frame try block."""
    try:
        return parse_entries(frames)
    except EntryFormatError:
        for offset, frame in enumerate(frames):
            decode_entry(frame, first_frame_no + offset)  # raises with the right frame number
        raise  # unreachable: some frame failed above


def _decode_append_entries(msg_id: bytes, args: Sequence[bytes]) -> AppendEntries:
    _need(args, 5, "AppendEntries")
    return check_peer_message(
        AppendEntries(
            decode_string(args[0], 3),
            decode_uint(args[1], 4),
            decode_uint(args[2], 5),
            decode_uint(args[3], 6),
            decode_uint(args[4], 7),
            decode_entries(args[5:], 8) if len(args) > 5 else (),
        )
    )


def _decode_install_snapshot(msg_id: bytes, args: Sequence[bytes]) -> InstallSnapshot:
    _need(args, 7, "InstallSnapshot")
    return check_peer_message(
        InstallSnapshot(
            decode_string(args[0], 3),
            decode_uint(args[1], 4),
            decode_uint(args[2], 5),
            decode_uint(args[3], 6),
            decode_uint(args[4], 7),
            decode_uint(args[5], 8),
            bytes(args[6]),
        )
    )


def _decode_request_config(msg_id: bytes, args: Sequence[bytes]) -> RequestConfig:
    return RequestConfig()


def _decode_request_log_info(msg_id: bytes, args: Sequence[bytes]) -> RequestLogInfo:
    return RequestLogInfo()


def _decode_broadcast_url(msg_id: bytes, args: Sequence[bytes]) -> RequestBroadcastStateUrl:
    return RequestBroadcastStateUrl()


def _decode_request_update(msg_id: bytes, args: Sequence[bytes]) -> RequestUpdate:
    _need(args, 1, "RequestUpdate")
    if not args[0]:
        # The reference ignores it without reply; rejecting here also keeps the core from
        # ever building an entry without data (which would crash a reference follower).
        raise RemoteProtocolError("RequestUpdate data is empty", 3)
    return RequestUpdate(bytes(msg_id), bytes(args[0]))


def _decode_config_update(msg_id: bytes, args: Sequence[bytes]) -> ConfigUpdate:
    _need(args, 1, "ConfigUpdate")
    try:
        peers = peers_from_json(decode_json(args[0], 3))
    except PeerListError as exc:
        raise RemoteProtocolError(f"ConfigUpdate peers: {exc.message}", 3) from None
    return ConfigUpdate(bytes(msg_id), peers)


def _decode_request_entries(msg_id: bytes, args: Sequence[bytes]) -> RequestEntries:
    _need(args, 1, "RequestEntries")
    count = decode_nuint(args[1], 4) if len(args) > 1 else None
    # An empty offset frame is read as "no offset" (leniency; the reference never sends one).
    offset = decode_nuint(args[2], 5) if len(args) > 2 else None
    any_peer = len(args) > 3 and bool(decode_nuint(args[3], 6))
    min_index = (decode_nuint(args[4], 7) or 0) if len(args) > 4 else 0
    linearizable = len(args) > 5 and bool(decode_nuint(args[5], 8))
    return RequestEntries(
        decode_uint(args[0], 3), count, offset, any_peer, min_index, linearizable
    )


ArgDecoder = Callable[[bytes, Sequence[bytes]], Request]
"""Decodes a request's argument frames, given its id frame (``RequestUpdate`` and
``ConfigUpdate`` carry their request id there)."""


REQUEST_DECODERS: Final[Mapping[bytes, ArgDecoder]] = {
    TYPE_REQUEST_VOTE: _decode_request_vote,
    TYPE_APPEND_ENTRIES: _decode_append_entries,
    TYPE_INSTALL_SNAPSHOT: _decode_install_snapshot,
    TYPE_REQUEST_CONFIG: _decode_request_config,
    TYPE_REQUEST_LOG_INFO: _decode_request_log_info,
    TYPE_REQUEST_UPDATE: _decode_request_update,
    TYPE_CONFIG_UPDATE: _decode_config_update,
    TYPE_REQUEST_ENTRIES: _decode_request_entries,
    TYPE_REQUEST_BROADCAST_STATE_URL: _decode_broadcast_url,
}
"""The core types' argument decoders. ``raftlog/registry.py`` names each type's decoder in its
``decoder`` column (a test checks they agree); this table stays here because ``rpc/`` is a
leaf and the registry imports the topic wire (docs/architecture.md §2)."""


def dispatch_decoder(msg_type: bytes) -> ArgDecoder:
    """The decoder of a type without a message class of its own (raftlog's extensions): its
    argument frames are kept as they came in a ``ClientDispatch``, and the handler its
    registry row names decodes them (topic requests in ``raftlog/topics``, which this leaf
    package does not know)."""
    if not msg_type or msg_type in REQUEST_DECODERS:
        raise LocalProtocolError(f"ClientDispatch type {msg_type!r} is empty or built-in")

    def decode(msg_id: bytes, args: Sequence[bytes]) -> ClientDispatch:
        return ClientDispatch(bytes(msg_type), tuple(bytes(a) for a in args))

    return decode




def decode_request_args(msg_type: bytes, msg_id: bytes, args: Sequence[bytes]) -> Request:
    """Decode the argument frames (everything after the ident) of a request of ``msg_type``.

    Checks the id frame where the protocol constrains it: 1-3 bytes for ``? + $``, exactly 12
    bytes for ``= &`` (whose id *is* the message's ``request_id``).
    """
    if not msg_type:
        raise RemoteProtocolError("empty message type", 1)
    decoder = REQUEST_DECODERS.get(msg_type)
    if decoder is None:
        return ClientDispatch(bytes(msg_type), tuple(bytes(a) for a in args))
    _check_id(msg_type, msg_id)
    return decoder(msg_id, args)


def decode_request(frames: Sequence[bytes]) -> DecodedRequest:
    """Decode ``[id, type, ident, args...]`` (docs/protocol.md §5.3 dispatch)."""
    msg_id, msg_type, ident = split_header(frames)
    message = decode_request_args(msg_type, msg_id, frames[ARGS_FRAME:])
    return DecodedRequest(msg_id, msg_type, ident, message)


# --- StateBroadcast (§11.2): [ident, term, lastIndex, entries...], no id frame ----------------


def encode_broadcast(msg: StateBroadcast, *, ident: bytes) -> list[bytes]:
    """``[ident, term, lastIndex, entries...]`` of a typed broadcast."""
    return encode_broadcast_raw(ident, msg.term, msg.last_index, entries_bytes(msg.entries))


def encode_broadcast_raw(
    ident: bytes, term: int, last_index: int, raw_entries: Sequence[bytes] = ()
) -> list[bytes]:
    """The same frames from entries already serialized (the publishing state machine's fast
    path: committed entries are applied as stored bytes, never re-encoded); no entries: a
    heartbeat carrying ``last_index`` = lastApplied."""
    frames = [ident, encode_uint(term), encode_uint(last_index)]
    frames.extend(raw_entries)
    return frames


def decode_broadcast(frames: Sequence[bytes]) -> tuple[bytes, StateBroadcast]:
    """``(ident, broadcast)``; the caller checks the ident (SUB matches prefixes only)."""
    if len(frames) < 3:
        raise RemoteProtocolError(f"StateBroadcast has {len(frames)} frames, at least 3 needed")
    entries = decode_entries(frames[3:], 3) if len(frames) > 3 else ()
    return frames[0], StateBroadcast(decode_uint(frames[1], 1), decode_uint(frames[2], 2), entries)
