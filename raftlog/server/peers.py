"""Outbound peer RPCs: one DEALER per other peer, msgids, response matching (docs/protocol.md §6).

The core decides every (re)transmission on its ticks. A new request object gets the next
msgid of its target (a counter mod 2^24, as the reference); the very same object emitted again
is a retransmission and is sent with its original msgid and frames, so that a reference
follower recognises the duplicate (docs/protocol.md §6). Responses are handed back with the request
object their msgid belongs to; late and duplicated ones too (the core ignores stale ones).

Each channel has a link gate: nothing is queued for a peer that is not connected (the send is
dropped and counted, the core retransmits on its timeout), so a peer coming back does not
receive a backlog of stale requests. The gate follows the DEALER's monitor events (its monitor
socket is polled with the others); it is not ``ZMQ_IMMEDIATE``, which made libzmq abort a peer
reading a burst of answers from a peer that had just died (``raftlog.sockets``).

Memory stays bounded: at most ``MAX_OUTSTANDING`` unanswered msgids are remembered per peer
(the oldest are forgotten: their answers, if any, are dropped), and each DEALER queues at most
``sockets.PEER_SEND_HIGH_WATER_MARK`` messages for an unreachable peer before sends are dropped
(the core sends again on its next timeout).
"""

from __future__ import annotations

import contextlib
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from typing import Final

import zmq
from zmq.utils.monitor import parse_monitor_message

from raftlog import sockets
from raftlog.errors import LocalProtocolError, RemoteProtocolError
from raftlog.metrics import PeerMetrics
from raftlog.rpc.frames import decode_msg_id, encode_msg_id, next_msg_id
from raftlog.rpc.messages import (
    TYPE_APPEND_ENTRIES,
    TYPE_INSTALL_SNAPSHOT,
    TYPE_REQUEST_VOTE,
    AppendEntries,
    ClientDispatch,
    InstallSnapshot,
    Peer,
    PeerRequest,
    PeerResponse,
    RequestVote,
)
from raftlog.rpc.request_encoders import encode_request
from raftlog.rpc.response_decoders import decode_response
from raftlog.security.settings import CurveClient
from raftlog.server.interfaces import EventLog
from raftlog.transport import send_frames

MAX_OUTSTANDING: Final = 4096

_REQUEST_TYPES: Final[dict[type, bytes]] = {
    AppendEntries: TYPE_APPEND_ENTRIES,
    RequestVote: TYPE_REQUEST_VOTE,
    InstallSnapshot: TYPE_INSTALL_SNAPSHOT,
}


class PeerChannel:
    """The DEALER to one peer and the requests awaiting its answers."""

    def __init__(
        self,
        context: zmq.Context[zmq.Socket[bytes]],
        peer: Peer,
        ident: bytes,
        rpc_timeout_ms: int,
        *,
        curve: CurveClient | None = None,
        metrics: PeerMetrics | None = None,
    ) -> None:
        self.peer = peer
        self._ident = ident
        self._msg_id = 0
        self._outstanding: OrderedDict[int, PeerRequest] = OrderedDict()
        self._asked: OrderedDict[int, Callable[[list[bytes]], None]] = OrderedDict()
        """Extension requests (``ask``) awaiting their answer, by msgid."""
        self._last: tuple[PeerRequest, int, list[bytes]] | None = None
        self.socket, self.monitor = sockets.peer_dealer(
            context, peer.url, reconnect_ivl_ms=rpc_timeout_ms, curve=curve
        )
        self.link_up = sockets.link_up_from_start(peer.url)
        """Whether the last link event was a successful handshake: requests go out only then."""
        metrics = metrics or PeerMetrics()  # a channel on its own (tests) counts for nobody
        self._link_family = metrics.peer_link_up
        self._link_gauge = metrics.peer_link_up.labels(peer=peer.id)
        self._link_gauge.set(int(self.link_up))
        self._dropped = metrics.peer_requests_dropped.labels(peer=peer.id)
        """Requests not sent (link down, queue full): ``raftlog_peer_requests_dropped``."""

    def read_link_events(self) -> bool:
        """Fold the monitor's queued events into :attr:`link_up` (the monitor delivers only
        ``sockets.PEER_LINK_EVENTS``, so the newest one says up or down); True if it changed."""
        was = self.link_up
        while True:
            try:
                frames = self.monitor.recv_multipart(zmq.NOBLOCK)
            except zmq.Again:
                break
            try:
                event = parse_monitor_message(frames)["event"]
            except (ValueError, KeyError):  # not a monitor message: cannot come from libzmq
                continue
            self.link_up = event == zmq.EVENT_HANDSHAKE_SUCCEEDED
        self._link_gauge.set(int(self.link_up))
        return self.link_up != was

    def send(self, request: PeerRequest) -> None:
        """Send ``request``: a new object gets the next msgid; the same object again is a
        retransmission with its original msgid and frames (a reference follower recognises
        it)."""
        last = self._last
        if last is not None and last[0] is request:  # a retransmission: same msgid and frames
            msg_id, frames = last[1], last[2]
        else:
            self._msg_id = msg_id = next_msg_id(self._msg_id)
            frames = encode_request(request, ident=self._ident, id=encode_msg_id(msg_id))
            self._last = (request, msg_id, frames)
        self._outstanding[msg_id] = request
        if len(self._outstanding) > MAX_OUTSTANDING:
            self._outstanding.popitem(last=False)
        self._send(frames)

    def _send(self, frames: list[bytes]) -> None:
        if self.link_up:  # else the peer is not connected: a request queued now would be stale
            try:
                send_frames(self.socket, frames)
                return
            except zmq.Again:
                pass
        self._dropped.inc()

    def ask(
        self, msg_type: bytes, args: Sequence[bytes], answer: Callable[[list[bytes]], None]
    ) -> None:
        """Send a raftlog extension request (e.g. ``RI``, issue #29) to this peer; its
        answer's frames after the id go to ``answer`` (never called if none comes: the
        caller times out). Sent once, never retransmitted by this channel."""
        self._msg_id = msg_id = next_msg_id(self._msg_id)
        self._asked[msg_id] = answer
        if len(self._asked) > MAX_OUTSTANDING:
            self._asked.popitem(last=False)
        request = ClientDispatch(msg_type, tuple(args))
        self._send(encode_request(request, ident=self._ident, id=encode_msg_id(msg_id)))

    def receive(self, frames: list[bytes]) -> tuple[PeerRequest, PeerResponse] | None:
        """Match one response; None if it answers nothing we remember (or answered an
        ``ask``, handed to its callback)."""
        if not frames:
            raise RemoteProtocolError("empty response from peer")
        msg_id = decode_msg_id(frames[0], 0)
        asked = self._asked.pop(msg_id, None)
        if asked is not None:
            asked(frames[1:])
            return None
        request = self._outstanding.pop(msg_id, None)
        if request is None:
            return None
        _, response = decode_response(_REQUEST_TYPES[type(request)], frames)
        if not isinstance(response, PeerResponse):  # decode_response maps peer types only
            raise LocalProtocolError(f"unexpected response type {type(response).__name__}")
        return request, response

    def cancel_all(self) -> None:
        """Forget every outstanding request (the core has moved on: stepped down)."""
        self._outstanding.clear()
        self._last = None

    def close(self) -> None:
        """Close the DEALER and its monitor without lingering (queued requests are stale);
        the link's gauge series goes with them."""
        self._link_family.remove(peer=self.peer.id)
        with contextlib.suppress(zmq.ZMQError):
            self.socket.disable_monitor()
        self.monitor.close(linger=0)
        self.socket.close(linger=0)


class PeerChannels:
    """All outbound channels, reconciled with the configuration in effect."""

    def __init__(
        self,
        context: zmq.Context[zmq.Socket[bytes]],
        self_id: str,
        ident: bytes,
        rpc_timeout_ms: int,
        poller: zmq.Poller,
        *,
        curve: CurveClient | None = None,
        metrics: PeerMetrics | None = None,
        log: EventLog | None = None,
    ) -> None:
        self._context = context
        self._self_id = self_id
        self._ident = ident
        self._rpc_timeout_ms = rpc_timeout_ms
        self._poller = poller
        self._curve = curve
        self._metrics = metrics
        self._log = log
        self.by_id: dict[str, PeerChannel] = {}
        self.by_socket: dict[zmq.Socket[bytes], PeerChannel] = {}
        self.by_monitor: dict[zmq.Socket[bytes], PeerChannel] = {}

    def reconcile(self, peers: Iterable[Peer]) -> None:
        """Connect to every peer of ``peers`` (except ourselves), reconnect those whose URL
        changed, close the others."""
        wanted = {p.id: p for p in peers if p.id != self._self_id}
        for peer_id in list(self.by_id):
            channel = self.by_id[peer_id]
            if wanted.get(peer_id) != channel.peer:
                self._drop(channel)
        for peer_id, peer in wanted.items():
            if peer_id not in self.by_id:
                channel = PeerChannel(
                    self._context, peer, self._ident, self._rpc_timeout_ms,
                    curve=self._curve, metrics=self._metrics,
                )
                self.by_id[peer_id] = channel
                self.by_socket[channel.socket] = channel
                self.by_monitor[channel.monitor] = channel
                self._poller.register(channel.socket, zmq.POLLIN)
                self._poller.register(channel.monitor, zmq.POLLIN)

    def read_link_events(self, socket: zmq.Socket[bytes]) -> bool:
        """If ``socket`` (found readable by the poll) is a channel's monitor, fold its events
        into that channel's link gate and return True; False for any other socket."""
        channel = self.by_monitor.get(socket)
        if channel is None:
            return False
        if channel.read_link_events() and self._log is not None:  # only changes: no flood
            event = "peer_link_up" if channel.link_up else "peer_link_down"
            self._log.info(event, peer=channel.peer.id, url=channel.peer.url)
        return True

    def link_states(self) -> dict[str, bool]:
        """Each channel's link gate by peer id (the status page's link column)."""
        return {peer_id: channel.link_up for peer_id, channel in self.by_id.items()}

    def _drop(self, channel: PeerChannel) -> None:
        self._poller.unregister(channel.socket)
        self._poller.unregister(channel.monitor)
        del self.by_id[channel.peer.id]
        del self.by_socket[channel.socket]
        del self.by_monitor[channel.monitor]
        channel.close()

    def send(self, peer_id: str, request: PeerRequest) -> bool:
        """Send ``request`` to ``peer_id``; False when no channel exists (not in the
        configuration)."""
        channel = self.by_id.get(peer_id)
        if channel is None:
            return False
        channel.send(request)
        return True

    def ask(
        self,
        peer_id: str,
        msg_type: bytes,
        args: Sequence[bytes],
        answer: Callable[[list[bytes]], None],
    ) -> bool:
        """``PeerChannel.ask`` on ``peer_id``'s channel; False when there is none."""
        channel = self.by_id.get(peer_id)
        if channel is None:
            return False
        channel.ask(msg_type, args, answer)
        return True

    def cancel_all(self) -> None:
        """Forget every outstanding request on every channel (the core stepped down)."""
        for channel in self.by_id.values():
            channel.cancel_all()

    def close(self) -> None:
        """Close every channel."""
        for channel in list(self.by_id.values()):
            self._drop(channel)


class PeerOutbox:
    """The Ready executor's ``Outbox`` on a real peer: requests go out through the DEALER
    channels, answers to inbound peer requests through the ROUTER (``reply``)."""

    def __init__(
        self, channels: PeerChannels, reply: Callable[[object, PeerResponse], None]
    ) -> None:
        self._channels = channels
        self._reply = reply

    def connect(self, peers: Sequence[Peer]) -> None:
        """Reach exactly ``peers`` (a configuration change)."""
        self._channels.reconcile(peers)

    def send_request(self, to: str, message: PeerRequest) -> None:
        """A new peer request (dropped if ``to`` has no channel: the core retries)."""
        self._channels.send(to, message)

    def send_reply(self, token: object, message: PeerResponse) -> None:
        """Answer an inbound peer request."""
        self._reply(token, message)
