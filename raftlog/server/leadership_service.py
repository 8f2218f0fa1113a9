"""Emergency leadership tools on a peer's ROUTER: ``AT`` take leadership now (Raft's
TimeoutNow, asked by ``raftlog-admin leader transfer``) and ``AD`` drain for maintenance
(``raftlog-admin drain``). Both are raftlog extensions (``raftlog.rpc.admin``); the core
decides (``RaftCore.take_leadership``, ``RaftCore.set_drained``), this only translates.
Under CURVE both need role admin (``raftlog.security.policy``: unknown types do)."""

from __future__ import annotations

from typing import Protocol

from raftlog.errors import RemoteProtocolError
from raftlog.rpc.admin import decode_drain_request, encode_take_leadership_response
from raftlog.rpc.frames import encode_uint
from raftlog.rpc.messages import ClientDispatch, ClientDispatchResponse
from raftlog.server.interfaces import EventLog, Replies


class LeadershipControl(Protocol):
    """The part of the core these tools use."""

    def take_leadership(self) -> str | None:
        """Campaign now as a transfer's target; None, or why not."""
        ...

    def set_drained(self, drained: bool) -> None:
        """Set whether this peer may campaign."""
        ...

    @property
    def drained(self) -> bool:
        """Whether this peer is drained."""
        ...


class LeadershipService:
    """Answers ``AT`` and ``AD``."""

    def __init__(self, core: LeadershipControl, replies: Replies, log: EventLog) -> None:
        self._core = core
        self._replies = replies
        self._log = log

    def take_leadership(self, routing: bytes, msg_id: bytes, message: ClientDispatch) -> None:
        """``AT``: campaign now (a transfer campaign), or say why not."""
        refusal = self._core.take_leadership()
        self._log.info("leadership_transfer_asked", refused=refusal)
        answer = encode_take_leadership_response(refusal)
        self._replies.reply(routing, msg_id, ClientDispatchResponse(answer))

    def drain(self, routing: bytes, msg_id: bytes, message: ClientDispatch) -> None:
        """``AD``: set this peer's drain state; answer the state now. A malformed request
        is dropped (logged), like any malformed message."""
        try:
            wanted = decode_drain_request(message.args)
        except RemoteProtocolError as exc:
            self._log.warning("drain_request_malformed", error=str(exc))
            return
        self._core.set_drained(wanted)
        self._log.info("drain_changed", drained=wanted)
        state = (encode_uint(int(self._core.drained)),)
        self._replies.reply(routing, msg_id, ClientDispatchResponse(state))
