"""``ReplySender``: the one place answers to ROUTER requests leave a peer.

Every service hands it a typed message (``raftlog.rpc``); it encodes it with
``rpc.responses.encode_reply_body`` and sends it behind the routing id and the echoed id
(``transport.send_routed``). A client that is gone (the ROUTER cannot route, or its queue is
full) loses the answer, which is counted: a peer never blocks on one slow client.
"""

from __future__ import annotations

import zmq

from raftlog.metrics import PeerMetrics
from raftlog.rpc.responses import ServerReply, encode_reply_body
from raftlog.transport import send_routed


class ReplySender:
    """``Replies`` over the peer's ROUTER socket."""

    def __init__(self, router: zmq.Socket[bytes], metrics: PeerMetrics) -> None:
        self._router = router
        self._dropped = metrics.replies_dropped

    def reply(self, routing: bytes, msg_id: bytes, message: ServerReply) -> None:
        """Encode and send; dropped (counted) when the ROUTER cannot deliver it now."""
        try:
            send_routed(self._router, routing, msg_id, encode_reply_body(message))
        except zmq.Again:
            self._dropped.inc()
