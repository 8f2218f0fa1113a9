"""raftlog's administrative RPC extensions: typed messages (two-byte types, docs/protocol.md
§10.6).

``AC`` compact -- any peer, about its own log:

    request   [id, "AC", ident]
    response  [id, json-uint index]     the new snapshot index; 0: nothing could be compacted

Nothing to compact happens when the applied index is already covered by the snapshot, or the
oldest request id still remembered (docs/protocol.md §12.7) holds the prefix back. The wire keeps
"0 means nothing" (what existing clients read); the typed answer names it with
:class:`CompactStatus` so no caller compares against a magic 0.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Final

from raftlog.errors import LocalProtocolError, RemoteProtocolError
from raftlog.rpc.frames import decode_string, decode_uint, encode_string, encode_uint
from raftlog.rpc.messages import ClientDispatch

TYPE_COMPACT: Final = b"AC"
"""Compact the receiving peer's log now (``raftlog-admin compact``)."""


class CompactStatus(Enum):
    """Outcome of ``AC``."""

    COMPACTED = "compacted"
    NOTHING_TO_COMPACT = "nothing_to_compact"


@dataclass(frozen=True, slots=True)
class CompactResponse:
    """The answer to ``AC``: ``index`` is the new snapshot index when ``COMPACTED``."""

    status: CompactStatus
    index: int = 0

    @classmethod
    def of(cls, index: int | None) -> CompactResponse:
        """From the compaction policy's result (None: nothing was compacted)."""
        if index is None or index == 0:
            return cls(CompactStatus.NOTHING_TO_COMPACT)
        return cls(CompactStatus.COMPACTED, index)


def compact_request() -> ClientDispatch:
    """The ``AC`` request (encode it with ``request_encoders.encode_request``)."""
    return ClientDispatch(TYPE_COMPACT)


def encode_compact_response(msg: CompactResponse) -> list[bytes]:
    """The frames after the id."""
    if msg.status is CompactStatus.COMPACTED:
        if msg.index <= 0:
            raise LocalProtocolError("COMPACTED needs the new snapshot index")
        return [encode_uint(msg.index)]
    return [encode_uint(0)]


def decode_compact_response(frames: Sequence[bytes]) -> CompactResponse:
    """The frames after the id of an ``AC`` answer."""
    if len(frames) != 1:
        raise RemoteProtocolError(f"a compact answer has one frame, got {len(frames)}", 1)
    return CompactResponse.of(decode_uint(frames[0], 1))


# -- leadership transfer and drain (docs/operations.md "Emergency tools") ---------------------
TYPE_TAKE_LEADERSHIP: Final = b"AT"
"""Raft's TimeoutNow as a raftlog extension: the receiving peer campaigns at once.

    request   [id, "AT", ident]
    response  [id, string reason]      empty: campaigning now; else why not

``raftlog-admin leader transfer`` sends it only to a peer that answered a raftlog-only
probe, so a reference peer never receives it."""

TYPE_DRAIN: Final = b"AD"
"""Drain (or undrain) the receiving peer for maintenance: it never campaigns.

    request   [id, "AD", ident, uint 1|0]      1: drain, 0: undrain
    response  [id, uint 1|0]                   the peer's drain state now"""


def take_leadership_request() -> ClientDispatch:
    """The ``AT`` request."""
    return ClientDispatch(TYPE_TAKE_LEADERSHIP)


def encode_take_leadership_response(refusal: str | None) -> tuple[bytes, ...]:
    """The frames after the id: empty string when the peer campaigns."""
    return (encode_string(refusal or ""),)


def decode_take_leadership_response(frames: Sequence[bytes]) -> str | None:
    """None when the peer campaigns, else its reason for refusing."""
    if len(frames) != 1:
        raise RemoteProtocolError(f"a take-leadership answer has one frame, got {len(frames)}", 1)
    return decode_string(frames[0], 1) or None


def drain_request(drained: bool) -> ClientDispatch:
    """The ``AD`` request."""
    return ClientDispatch(TYPE_DRAIN, (encode_uint(int(drained)),))


def decode_drain_request(args: Sequence[bytes]) -> bool:
    """The wanted drain state; ``RemoteProtocolError`` for anything but one uint 0 or 1."""
    if len(args) != 1 or decode_uint(args[0], 3) not in (0, 1):
        raise RemoteProtocolError("a drain request has one frame, uint 0 or 1", 3)
    return decode_uint(args[0], 3) == 1


def decode_drain_response(frames: Sequence[bytes]) -> bool:
    """The peer's drain state after the request."""
    if len(frames) != 1:
        raise RemoteProtocolError(f"a drain answer has one frame, got {len(frames)}", 1)
    return decode_uint(frames[0], 1) == 1
