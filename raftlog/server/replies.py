"""``ReplySender``: the one place answers to ROUTER requests leave a peer.

Every service hands it a typed message (``raftlog.rpc``, or a topic answer from
``raftlog.topics.wire``); it encodes it with :func:`encode_reply_body` -- one lookup by exact
type in the core table of ``rpc.responses`` plus the topic answer -- and sends it behind
the routing id and the echoed id (``transport.send_routed``). A client that is gone (the
ROUTER cannot route, or its queue is full) loses the answer, which is counted: a peer
never blocks on one slow client.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Final, TypeAlias

import zmq

from raftlog.errors import LocalProtocolError
from raftlog.metrics import PeerMetrics
from raftlog.rpc.responses import REPLY_ENCODERS, CoreReply, encode_update_done
from raftlog.server.answer_backlog import AnswerBacklog
from raftlog.server.update_waiters import Waiter
from raftlog.topics.wire_publish import PublishReply, encode_publish_reply
from raftlog.transport import send_routed, send_update_dones

ServerReply: TypeAlias = CoreReply | PublishReply
"""Everything a peer answers: the core responses, raftlog's extensions and the topic
publish answer."""

_ENCODERS: Final[dict[type, Callable[[Any], list[bytes]]]] = {
    **REPLY_ENCODERS,
    PublishReply: encode_publish_reply,
}
"""One lookup by exact type (the reply hot path: no chain of isinstance checks)."""

REPLY_TYPES: Final = frozenset(_ENCODERS)
"""Every reply type a peer can send (its byte vectors are pinned in the tests)."""


def encode_reply_body(msg: ServerReply) -> list[bytes]:
    """The frames after the id of any answer a peer sends (the sender puts the routing id
    and the echoed id in front without copying this list)."""
    encoder = _ENCODERS.get(type(msg))
    if encoder is None:
        raise LocalProtocolError(f"not a response: {type(msg).__name__}")
    return encoder(msg)


def encode_reply(msg_id: bytes, msg: ServerReply) -> list[bytes]:
    """``[id, frames...]`` of any answer a peer sends; ``msg_id`` is the request's frame 1,
    echoed byte for byte."""
    return [msg_id, *encode_reply_body(msg)]


class ReplySender:
    """``Replies`` over the peer's ROUTER socket."""

    def __init__(self, router: zmq.Socket[bytes], metrics: PeerMetrics,
                 answers: AnswerBacklog | None = None) -> None:
        self._router = router
        self._dropped = metrics.replies_dropped
        self._answers = answers
        """Counts each answer's bytes against its connection (``max_answer_backlog``)."""

    def reply(self, routing: bytes, msg_id: bytes, message: ServerReply) -> None:
        """Encode and send; dropped (counted) when the ROUTER cannot deliver it now."""
        frames = encode_reply_body(message)
        try:
            send_routed(self._router, routing, msg_id, frames)
        except zmq.Again:
            self._dropped.inc()
            return
        if self._answers is not None:
            self._answers.sent(routing, len(msg_id) + sum(map(len, frames)))

    def unread_over_limit(self, routing: bytes) -> bool:
        """Whether ``routing``'s connection leaves more answer bytes unread than allowed
        (then it is shed now): a waiting read asks before it is read again."""
        return self._answers is not None and self._answers.over(routing)

    def updates_done(self, first: int, waiters: Sequence[Waiter]) -> None:
        """``update_done`` of each waiter, at ``first``, ``first + 1``, ... (a released
        ``WaiterRun``: one call per run, not one per update)."""
        dropped = send_update_dones(self._router, first, waiters, encode_update_done)
        if dropped:
            self._dropped.inc(dropped)

    def update_done(self, routing: bytes, rid: bytes, index: int) -> None:
        """The final answer ``[true, index]`` to RequestUpdate ``rid``: the bytes of
        ``reply(routing, rid, RequestUpdateResponse(rid, DONE, index=index))`` with no
        message object and no encoder lookup -- a busy leader sends one per committed update
        (issue #28). The one-waiter case of ``updates_done``: one sender of this answer."""
        self.updates_done(index, ((routing, rid, False),))
