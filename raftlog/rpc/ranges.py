"""Term and index bounds of the peer RPCs and their responses (see :mod:`raftlog.bounds`).

One function per direction, used by the codec (the network edge: a message carrying a term
above ``MAX_TERM`` or an index above ``MAX_INDEX`` is refused with
:class:`OutOfRangeError`, which the peer counts and logs as a drop) and by the consensus core
(which never trusts its driver to have checked). Every term and index field of RequestVote,
AppendEntries (including the terms of the entries it carries), InstallSnapshot and their
responses is covered.
"""

from __future__ import annotations

from operator import attrgetter
from typing import Final, TypeVar

from raftlog.bounds import out_of_range_reason
from raftlog.errors import RemoteProtocolError
from raftlog.rpc.messages import (
    AppendEntries,
    AppendEntriesResponse,
    InstallSnapshot,
    InstallSnapshotResponse,
    RequestVote,
    RequestVoteResponse,
)

PeerMessage = (
    RequestVote
    | AppendEntries
    | InstallSnapshot
    | RequestVoteResponse
    | AppendEntriesResponse
    | InstallSnapshotResponse
)
M = TypeVar(
    "M",
    RequestVote,
    AppendEntries,
    InstallSnapshot,
    RequestVoteResponse,
    AppendEntriesResponse,
    InstallSnapshotResponse,
)


_TERM: Final = attrgetter("term")


class OutOfRangeError(RemoteProtocolError):
    """A well-formed peer message whose term or index no peer may adopt.

    ``drop_reason`` is the drop reason (``term_out_of_range`` or ``index_out_of_range``): the
    dispatcher uses it as the counter and log event name, so a forged huge term is visible
    as such and not lost among malformed messages."""

    def __init__(self, message: str, *, drop_reason: str) -> None:
        super().__init__(message)
        self.drop_reason = drop_reason


def peer_message_out_of_range(message: PeerMessage) -> str | None:
    """The drop reason when ``message`` carries a term or index above the ceiling, else None.
    The answers and appends that make up nearly all traffic are told apart by their exact
    class first (the ``isinstance`` chain below serves the rest and any subclass)."""
    if type(message) is AppendEntriesResponse:
        return _response_out_of_range(message)
    if type(message) is AppendEntries:
        return _append_out_of_range(message)
    if isinstance(message, RequestVote):
        return out_of_range_reason(
            max(message.term, message.last_log_term), message.last_log_index
        )
    if isinstance(message, AppendEntries):
        return _append_out_of_range(message)
    if isinstance(message, InstallSnapshot):
        return out_of_range_reason(
            max(message.term, message.last_included_term), message.last_included_index
        )
    if isinstance(message, AppendEntriesResponse):
        return _response_out_of_range(message)
    return out_of_range_reason(message.term, 0)


def _append_out_of_range(message: AppendEntries) -> str | None:
    entries = message.entries  # the highest entry term stands for all of them
    top = max(map(_TERM, entries)) if entries else 0
    term = max(message.term, message.prev_log_term, top)
    last = message.prev_log_index + len(entries)  # not below prevLogIndex
    return out_of_range_reason(term, max(last, message.commit_index))


def _response_out_of_range(message: AppendEntriesResponse) -> str | None:
    hint = message.next_index_hint
    return out_of_range_reason(message.term, 0 if hint is None else hint)


def check_peer_message(message: M) -> M:
    """``message`` itself, or :class:`OutOfRangeError` (for the decoders)."""
    reason = peer_message_out_of_range(message)
    if reason is not None:
        raise OutOfRangeError(
            f"{reason}: {type(message).__name__} carries a value above 2^48-1", drop_reason=reason
        )
    return message
