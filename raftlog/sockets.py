"""The one place where raftlog creates ZeroMQ sockets.

Why a factory: every socket the project opens — the peer's ROUTER, the DEALERs between
peers, the PUB broadcast, the clients' DEALERs and SUBs — gets its options here, so that a
property all sockets of a kind must share (limits, linger, reconnect pacing, and transport
security next) is a change in this module rather than in every file that opens a socket.
Nothing else in ``raftlog`` calls ``Context.socket``.

Transport security: pass ``curve=`` (a :class:`~raftlog.security.settings.CurveServer` to
server sockets, a :class:`~raftlog.security.settings.CurveClient` to connecting ones) and the
socket runs CURVE — encrypted, and authenticated by the peer's ZAP handler — instead of the
plaintext NULL mechanism, which stays the default (the reference ``zmq-raft`` speaks only
NULL, so mixed clusters are plaintext).

The functions are generic over the context: a ``zmq.Context`` gives blocking sockets (the
peer, the CLI, benchmarks), a ``zmq.asyncio.Context`` gives awaitable ones (the clients).

No socket sets ``ZMQ_IMMEDIATE``. With it, libzmq (4.3.5, the one pyzmq bundles) ends a
connection's pipe from the socket's side when the connection drops (``hiccuped``): if the
socket is reading a multipart message at that moment -- it handles commands every 100 frames,
in the middle of a message too -- the rest of the message is gone and the process aborts in
``Assertion failed: !_more (src/fq.cpp:80)``, or the socket is left reporting a message it
can never deliver (a poll loop over it spins). A client reading entries, or a peer reading a
burst of answers, while the other end died did exactly that (docs/reliability.md;
``tests/integration/test_reconnect_abort.py`` reproduces it). What ``IMMEDIATE`` was for --
nothing queued for a peer that is not connected -- is a gate in Python instead, opened and
closed by the connecting socket's monitor events: ``PeerChannel.link_up`` on a peer,
``DealerChannel`` in the client.
"""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Final, TypeVar

import zmq

from raftlog.options import RaftOptions
from raftlog.security.settings import CurveClient, CurveServer

#: Largest message any raftlog socket accepts from the network (a peer may send a snapshot
#: chunk or a batch of AppendEntries; a client a single entry). Larger ones are dropped by
#: libzmq before they reach Python, which disconnects the sender.
MAX_MESSAGE_SIZE: Final = 64 * 1024 * 1024

#: Queued messages per peer connection on the peer's ROUTER, each way. High because one
#: client may pipeline thousands of requests and the peer answers in bursts after an fsync.
ROUTER_HIGH_WATER_MARK: Final = 100_000

#: Requests queued towards one other peer. Low on purpose: replication is stop-and-wait, so
#: more than a few queued requests only means the peer is gone and they would be stale.
PEER_SEND_HIGH_WATER_MARK: Final = 64

#: Broadcast messages queued per subscriber before the PUB socket drops for that subscriber
#: (a subscriber detects the gap by index and fills it with RequestEntries).
PUB_HIGH_WATER_MARK: Final = 10_000

#: Requests a client may queue towards one peer before a send would block.
CLIENT_SEND_HIGH_WATER_MARK: Final = 1000

S = TypeVar("S", bound=zmq.Socket)  # type: ignore[type-arg]
_MONITORS = itertools.count()


ZAP_DOMAIN: Final = b"raftlog"
"""The ZAP domain of a CURVE peer's ROUTER (the ZAP handler answers for it)."""
ZAP_DOMAIN_BROADCAST: Final = b"raftlog-broadcast"
"""The ZAP domain of the PUB broadcast: it carries every topic, so the handler admits only
keys that may read them all (see ``raftlog.security.zap``)."""


@contextlib.contextmanager
def _closed_on_error(sock: zmq.Socket[Any]) -> Iterator[None]:
    """Close ``sock`` (and re-raise) when configuring it fails: a socket that is not handed
    out is not leaked, whatever option, key or address libzmq refused."""
    try:
        yield
    except zmq.ZMQError:
        sock.close(linger=0)
        raise


def _socket(
    context: zmq.Context[S],
    kind: int,
    curve: CurveServer | CurveClient | None = None,
    zap_domain: bytes = ZAP_DOMAIN,
) -> S:
    sock = context.socket(kind)
    sock.setsockopt(zmq.LINGER, 0)  # a closing socket never holds the process up
    if curve is None:
        return sock
    with _closed_on_error(sock):
        if isinstance(curve, CurveClient):  # a connecting socket
            sock.setsockopt(zmq.CURVE_SERVERKEY, curve.server_public)
            sock.setsockopt(zmq.CURVE_PUBLICKEY, curve.public)
            sock.setsockopt(zmq.CURVE_SECRETKEY, curve.secret)
        else:
            sock.setsockopt(zmq.CURVE_SERVER, 1)
            sock.setsockopt(zmq.CURVE_SECRETKEY, curve.secret)
            sock.setsockopt(zmq.ZAP_DOMAIN, zap_domain)
    return sock


def _bound(sock: S, bind_url: str) -> S:
    """``sock`` bound to ``bind_url``; closed (not leaked) when the bind fails."""
    with _closed_on_error(sock):
        sock.bind(bind_url)
    return sock


#: What a message to the peer's ROUTER may carry beyond its largest legitimate payload (one
#: log entry, or an AppendEntries batch): frame headers, ids, terms, indexes.
MESSAGE_OVERHEAD: Final = 64 * 1024

#: Largest subscription message the PUB broadcast accepts (a subscriber sends one byte and
#: a topic prefix; raftlog's and the reference's subscribers subscribe to everything).
MAX_SUBSCRIPTION_SIZE: Final = 1024


def message_budget(max_entry_data_size: int, peer_msg_data_size: int) -> int:
    """The per-message limit of a peer's ROUTER (issue #25): the largest legitimate message is
    a RequestUpdate / TP of one entry (``max_log_entry_data_size``) or an AppendEntries
    (``peer_msg_data_size`` of entries, or one entry larger than that), plus overhead."""
    return max_entry_data_size + peer_msg_data_size + MESSAGE_OVERHEAD


@dataclass(frozen=True, slots=True)
class ServedKeepalive:
    """TCP keepalive on every connection a listening socket serves (the ROUTER's clients and
    peers, the PUB's subscribers): a connection idle for half of ``timeout_ms`` is probed by
    the kernel every sixth of it, and closed after three unanswered probes -- within
    ``timeout_ms`` of the silence.

    Why: a remote that vanished without closing -- a host powered off, a partition, a NAT
    that dropped the mapping -- leaves an idle TCP connection open for good (no data in
    flight: the kernel never finds out). It would hold a connection slot and a principal's
    connections quota (a client whose host restarted would be locked out by its own dead
    connection). Why the kernel's probes and not ZMTP's PING: libzmq (4.3.5) cancels a timer
    by walking all of its I/O thread's timers, and a heartbeat keeps one or two per
    connection, cancelled at every PONG and every close -- with 10,000 connections the flood
    suite's run took twice as long and elected a new leader. The kernel answers probes for a
    live host whatever its application does (a paused client keeps its connection).

    Keepalive probes only an idle connection. One with data in flight -- answers or
    broadcasts sent to a host that died before acknowledging them -- was left to TCP's
    retransmission limit (``tcp_retries2``: ~15 minutes), holding its slot, its quota and up
    to ``max_answer_backlog`` of queued answers meanwhile; so ``TCP_MAXRT``
    (``TCP_USER_TIMEOUT``) closes a connection whose data stays unacknowledged for
    ``timeout_ms``. The same limit ends a live client whose receive window stays shut that
    long (it reads nothing while answers wait): it reconnects and asks again.
    Option ``dead_connection_timeout``."""

    timeout_ms: int

    def apply(self, sock: zmq.Socket[Any]) -> None:
        """Set the five options on ``sock`` (before it binds: they apply per connection)."""
        seconds = max(3, self.timeout_ms // 1000)
        sock.setsockopt(zmq.TCP_MAXRT, self.timeout_ms)
        sock.setsockopt(zmq.TCP_KEEPALIVE, 1)
        sock.setsockopt(zmq.TCP_KEEPALIVE_IDLE, max(1, seconds // 2))
        sock.setsockopt(zmq.TCP_KEEPALIVE_INTVL, max(1, seconds // 6))
        sock.setsockopt(zmq.TCP_KEEPALIVE_CNT, 3)


def served_keepalive(options: RaftOptions) -> ServedKeepalive | None:
    """The keepalive of the option ``dead_connection_timeout`` (None: off)."""
    timeout = options.dead_connection_timeout
    return ServedKeepalive(timeout) if timeout > 0 else None


def peer_router(
    context: zmq.Context[S], bind_url: str, *, max_message_size: int,
    curve: CurveServer | None = None, keepalive: ServedKeepalive | None = None,
) -> S:
    """The ROUTER a peer serves other peers and clients on, bound to ``bind_url``.

    ``max_message_size`` (``message_budget``) is libzmq's ``MAXMSGSIZE``: a frame announcing
    more is refused by the decoder from its header -- before its body is buffered -- and its
    connection dropped. libzmq has no limit on the sum of a message's frames, nor on their
    number, and buffers a whole multipart message before the application sees any of it;
    the peer checks the sum as it reads (``raftlog.transport.recv_bounded``), and what a
    connection may hold in libzmq meanwhile is docs/operations.md's "Message size" bound.
    ``keepalive`` closes connections whose remote vanished (:class:`ServedKeepalive`)."""
    sock = _socket(context, zmq.ROUTER, curve)
    with _closed_on_error(sock):
        sock.setsockopt(zmq.RCVHWM, ROUTER_HIGH_WATER_MARK)
        sock.setsockopt(zmq.SNDHWM, ROUTER_HIGH_WATER_MARK)
        sock.setsockopt(zmq.MAXMSGSIZE, max_message_size)
        if keepalive is not None:
            keepalive.apply(sock)
    return _bound(sock, bind_url)


def link_up_from_start(url: str) -> bool:
    """Whether a connection to ``url`` counts as up before any monitor event: an ``inproc``
    link reports no connection events, nor ever drops, so a link gate waiting for one (a
    peer's ``PeerChannel``, a client's ``DealerChannel``) would stay shut for good."""
    return url.startswith("inproc://")


#: ZMTP heartbeats on a peer DEALER's link: a PING every ``PEER_HEARTBEAT_IVL_MS``; a link
#: that then carries nothing back -- not the PONG, not an answer -- for
#: ``PEER_HEARTBEAT_TIMEOUT_MS`` is closed, so the link gate goes down. Why: a *silent* loss
#: (packets dropped by a firewall or a partition, a paused or hung host) leaves the TCP
#: connection open, and without this the gate, ``raftlog_peer_link_up`` and the status
#: page would say "up" for as long as TCP takes to give up (minutes), while requests queue
#: for the peer and arrive stale. Any received message cancels the timeout (libzmq), so a busy
#: link never closes for a late PONG. The remote's ZeroMQ I/O thread answers the PING (the
#: reference's libzmq too: ZMTP 3.1), not its Python loop, so a slow loop does not close it;
#: 1.5 s is five times the longest election timeout by default. A closed link reconnects
#: every ``reconnect_ivl`` and opens again at the next handshake; a connection attempt into
#: the same silence is given up after the same 1.5 s (``ZMQ_CONNECT_TIMEOUT``) and tried
#: again, so the link is back within about that long after the network heals, instead of
#: when the kernel's backed-off SYN retries next reach the peer (tens of seconds).
PEER_HEARTBEAT_IVL_MS: Final = 500
PEER_HEARTBEAT_TIMEOUT_MS: Final = 1500

#: The monitor events of a peer DEALER's link: up once a handshake succeeded (libzmq reports
#: it for every mechanism, NULL too), down when the connection drops or a handshake fails.
PEER_LINK_EVENTS: Final = (
    zmq.EVENT_HANDSHAKE_SUCCEEDED
    | zmq.EVENT_DISCONNECTED
    | zmq.EVENT_HANDSHAKE_FAILED_AUTH
    | zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL
    | zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL
)


def peer_dealer(
    context: zmq.Context[S], url: str, *, reconnect_ivl_ms: int,
    curve: CurveClient | None = None,
) -> tuple[S, S]:
    """The DEALER one peer uses to send requests to another peer at ``url``, and its
    :func:`connection_monitor` for :data:`PEER_LINK_EVENTS`, attached before the connect
    (an event sent before a monitor is attached is lost, and the link would look down for
    good).

    The monitor drives the channel's link gate: no request is queued for a peer that is not
    connected (it would be stale when the peer comes back; see the module docstring for why
    this is not ``ZMQ_IMMEDIATE``); ZMTP heartbeats close a link that went silent
    (:data:`PEER_HEARTBEAT_IVL_MS`). The reconnect interval follows the RPC timeout so a dead
    peer is not hammered with connection attempts."""
    sock = _socket(context, zmq.DEALER, curve)
    with _closed_on_error(sock):
        sock.setsockopt(zmq.SNDHWM, PEER_SEND_HIGH_WATER_MARK)
        sock.setsockopt(zmq.RCVHWM, PEER_SEND_HIGH_WATER_MARK * 4)
        sock.setsockopt(zmq.RECONNECT_IVL, reconnect_ivl_ms)
        sock.setsockopt(zmq.HEARTBEAT_IVL, PEER_HEARTBEAT_IVL_MS)
        sock.setsockopt(zmq.HEARTBEAT_TIMEOUT, PEER_HEARTBEAT_TIMEOUT_MS)
        sock.setsockopt(zmq.CONNECT_TIMEOUT, PEER_HEARTBEAT_TIMEOUT_MS)
        sock.setsockopt(zmq.MAXMSGSIZE, MAX_MESSAGE_SIZE)
    return _connect_monitored(sock, url, PEER_LINK_EVENTS)


def broadcast_pub(
    context: zmq.Context[S], bind_url: str, *, curve: CurveServer | None = None,
    keepalive: ServedKeepalive | None = None,
) -> S:
    """The PUB socket the BroadcastStateMachine publishes committed entries on; ``keepalive``
    closes an idle subscriber's connection once its host is gone."""
    sock = _socket(context, zmq.PUB, curve, ZAP_DOMAIN_BROADCAST)
    with _closed_on_error(sock):
        sock.setsockopt(zmq.SNDHWM, PUB_HIGH_WATER_MARK)
        sock.setsockopt(zmq.MAXMSGSIZE, MAX_SUBSCRIPTION_SIZE)  # it only receives subscriptions
        if keepalive is not None:
            keepalive.apply(sock)
    return _bound(sock, bind_url)


def client_dealer(
    context: zmq.Context[S], url: str, *, curve: CurveClient | None = None,
    unbounded: bool = False,
) -> S:
    """A client's DEALER to one peer at ``url`` (the CLI, benchmarks, tests' probes).
    ``unbounded`` lifts both queue limits (a load generator keeping thousands in flight)."""
    sock = _unconnected_client_dealer(context, curve, unbounded=unbounded)
    sock.connect(url)
    return sock


def _unconnected_client_dealer(
    context: zmq.Context[S], curve: CurveClient | None, *, unbounded: bool
) -> S:
    sock = _socket(context, zmq.DEALER, curve)
    with _closed_on_error(sock):
        sock.setsockopt(zmq.SNDHWM, 0 if unbounded else CLIENT_SEND_HIGH_WATER_MARK)
        if unbounded:
            sock.setsockopt(zmq.RCVHWM, 0)
    return sock


def monitored_client_dealer(
    context: zmq.Context[S], url: str, *, curve: CurveClient | None = None
) -> tuple[S, S]:
    """A client's DEALER to ``url`` (as :func:`client_dealer`) and its
    :func:`connection_monitor`, attached *before* the connect.

    Why this order: ZeroMQ sends a monitor event only to a monitor already attached, and on
    loopback the TCP connect and the handshake can finish in its I/O thread before the next
    line of Python runs. A monitor attached after the connect then never hears of the
    connection, and a client that cannot reach the cluster said "no connection could be
    made" although every peer had accepted it (the wrong-ident diagnosis on a busy machine)."""
    sock = _unconnected_client_dealer(context, curve, unbounded=False)
    return _connect_monitored(sock, url, CLIENT_MONITOR_EVENTS)


def _connect_monitored(sock: S, url: str, events: int) -> tuple[S, S]:
    """``sock`` connected to ``url`` with a monitor for ``events`` attached first; on any
    failure both are closed, not leaked."""
    with _closed_on_error(sock):
        monitor = connection_monitor(sock, events)
    try:
        sock.connect(url)
    except zmq.ZMQError:
        with contextlib.suppress(zmq.ZMQError):
            sock.disable_monitor()
        monitor.close(linger=0)
        sock.close(linger=0)
        raise
    return sock, monitor


#: The connection events a client watches on its DEALERs: enough to tell "connected", "lost"
#: and "refused" (ZeroMQ reports a refused TCP connect only as CLOSED + CONNECT_RETRIED).
CLIENT_MONITOR_EVENTS: Final = (
    zmq.EVENT_CONNECTED
    | zmq.EVENT_CONNECT_DELAYED
    | zmq.EVENT_CONNECT_RETRIED
    | zmq.EVENT_DISCONNECTED
    | zmq.EVENT_CLOSED
    | zmq.EVENT_HANDSHAKE_SUCCEEDED
    | zmq.EVENT_HANDSHAKE_FAILED_AUTH
    | zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL
    | zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL
)


def connection_monitor(sock: S, events: int = CLIENT_MONITOR_EVENTS) -> S:
    """A PAIR socket receiving ``sock``'s connection events (``zmq.utils.monitor`` frames).

    Why: ZeroMQ hides connection failures -- a DEALER to a port nobody listens on just
    retries forever -- so a client that must fail fast when every peer refuses has to watch
    these events. Call ``sock.disable_monitor()`` and close the returned socket before
    closing ``sock``.

    The queue of events is unbounded: libzmq's I/O thread *blocks* sending an event when the
    monitor's queue is full (1,000 by default), which under a connection flood stalled every
    connection of the peer, heartbeats included (issue #25)."""
    address = f"inproc://monitor.{id(sock):x}.{next(_MONITORS)}"
    sock.monitor(address, events)
    monitor: S = sock.context.socket(zmq.PAIR)
    monitor.setsockopt(zmq.LINGER, 0)
    monitor.setsockopt(zmq.RCVHWM, 0)  # before connecting: the pipe's limit is set then
    monitor.connect(address)
    return monitor


def client_sub(
    context: zmq.Context[S], url: str, prefix: bytes, *, curve: CurveClient | None = None
) -> S:
    """A SUB socket following a peer's broadcast at ``url``, filtered to ``prefix`` (the
    cluster ident frame, so one PUB port can serve one cluster only)."""
    sock = _socket(context, zmq.SUB, curve)
    sock.setsockopt(zmq.SUBSCRIBE, prefix)
    sock.connect(url)
    return sock
