"""Issue #25: the per-message limit as the peer reads its ROUTER, and the per-connection
backlog and connection caps of ``raftlog.server.backlog`` on real loopback sockets, and the
backlog's allowance for ZMTP heartbeat commands."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator

import pytest
import zmq
from zmq.utils.monitor import parse_monitor_message

from raftlog import sockets
from raftlog.metrics import PeerMetrics
from raftlog.server import backlog as backlog_module
from raftlog.server.backlog import (
    COMMAND_SIZE,
    ConnectionBacklog,
    bytes_received,
    connection_cap,
)
from raftlog.server.router_limits import subscriber_cap
from raftlog.transport import MessageTooLargeError, recv_bounded


def test_a_message_over_the_limit_is_dropped_whole_and_the_next_one_arrives() -> None:
    context = zmq.Context()
    try:
        router = sockets.peer_router(context, "inproc://bounded", max_message_size=1 << 20)
        dealer = context.socket(zmq.DEALER)
        dealer.connect("inproc://bounded")
        dealer.send_multipart([b"id", b"TP", *([b"x" * 4000] * 10)])  # 40 kB in small frames
        dealer.send_multipart([b"id2", b"TP", b"small"])
        seen: list[tuple[int, int, int]] = []
        time.sleep(0.05)
        with pytest.raises(MessageTooLargeError) as caught:
            recv_bounded(router, 10_000, with_user=False,
                         taken=lambda fd, n, f: seen.append((fd, n, f)))
        assert caught.value.size == 40_000 + 4 and caught.value.head[1] == b"id"
        frames, user = recv_bounded(router, 10_000, with_user=False)
        assert frames[1:] == [b"id2", b"TP", b"small"] and user is None
        assert seen == [(-1, 40_004, 13)]  # inproc: no descriptor; 13 frames with the routing id
    finally:
        context.destroy(linger=0)


@pytest.fixture
def server() -> Iterator[socket.socket]:
    with socket.create_server(("127.0.0.1", 0)) as listener:
        yield listener


def test_connection_caps_shed_the_oldest_idle_connection(server: socket.socket) -> None:
    shed = PeerMetrics().connections_shed
    guard = ConnectionBacklog(1 << 20, 0, shed, owner="t", max_connections=2)
    clients = [socket.create_connection(server.getsockname()) for _ in range(3)]
    accepted = [server.accept()[0] for _ in range(3)]
    try:
        guard.accepted(accepted[0].fileno())
        guard.accepted(accepted[1].fileno())
        guard.taken(accepted[0].fileno(), 10, 1)  # the first one talks: not idle
        guard.accepted(accepted[2].fileno())  # over the cap: the oldest idle is [1]
        clients[1].settimeout(2)
        assert clients[1].recv(1) == b""  # shut down
        assert {labels: v.value for labels, v in shed.series()} == {("max_connections",): 1}
        assert guard.connections == 2
    finally:
        for sock in clients + accepted:
            sock.close()


def test_a_connection_over_its_backlog_is_shut_down(server: socket.socket) -> None:
    guard = ConnectionBacklog(10_000, 0, PeerMetrics().connections_shed, owner="t")
    client = socket.create_connection(server.getsockname())
    conn = server.accept()[0]
    try:
        guard.accepted(conn.fileno())
        client.settimeout(5)
        client.sendall(b"x" * 20_000)  # taken: not backlog
        guard.taken(conn.fileno(), 20_000, 1)
        deadline = time.monotonic() + 5
        while (bytes_received(conn.fileno()) or 0) < 20_000 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert guard.scan(0) == 0
        client.sendall(b"x" * 100_000)  # nobody takes it: all of it is backlog
        while (bytes_received(conn.fileno()) or 0) < 120_000 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert guard.scan(0) == 1
        assert client.recv(1) == b""  # the end: libzmq then sees EOF and closes it
    finally:
        client.close()
        conn.close()


def test_the_default_cap_leaves_half_the_descriptors_to_http_and_a_reserve() -> None:
    assert connection_cap(20_000) == 9_000
    assert connection_cap(1024) == 384
    assert connection_cap(10) == 16


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _received(conn: socket.socket, at_least: int) -> None:
    deadline = time.monotonic() + 5
    while (bytes_received(conn.fileno()) or 0) < at_least and time.monotonic() < deadline:
        time.sleep(0.01)


def test_heartbeat_commands_are_allowed_for_by_the_age_of_a_connection(
    server: socket.socket, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What libzmq reads and the peer never takes (PINGs, PONGs) is not backlog while it
    stays within ``commands_per_s`` commands a second of the connection's age; a trickled
    message beyond that still is. Negative control: without the allowance the same idle
    connection's heartbeats alone get it shed."""
    monkeypatch.setattr(backlog_module, "SLACK", 0)
    clock = FakeClock()
    allowing = ConnectionBacklog(500, 0, PeerMetrics().connections_shed, owner="t",
                                 commands_per_s=2.1, clock=clock)
    strict = ConnectionBacklog(500, 0, PeerMetrics().connections_shed, owner="t", clock=clock)
    client = socket.create_connection(server.getsockname())
    conn = server.accept()[0]
    try:
        allowing.accepted(conn.fileno())
        strict.accepted(conn.fileno())
        clock.now += 600.0
        pings = 1200 * 41  # ten minutes of a peer link's CURVE PINGs, one every 0.5 s
        client.sendall(b"p" * pings)
        _received(conn, pings)
        assert allowing.backlog(conn.fileno()) == pings - int(600 * 2.1 * COMMAND_SIZE)
        assert allowing.scan(0) == 0
        assert strict.scan(0) == 1, "the negative control: heartbeats alone shed it"
    finally:
        client.close()
        conn.close()


def test_a_message_trickled_past_the_allowance_is_still_shed(
    server: socket.socket, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(backlog_module, "SLACK", 0)
    clock = FakeClock()
    guard = ConnectionBacklog(500, 0, PeerMetrics().connections_shed, owner="t",
                              commands_per_s=2.1, clock=clock)
    client = socket.create_connection(server.getsockname())
    conn = server.accept()[0]
    try:
        guard.accepted(conn.fileno())
        clock.now += 10.0  # allows 1,344 bytes of commands
        client.sendall(b"x" * 1900)  # 1,900 - 1,344 = 556 > 500
        _received(conn, 1900)
        assert guard.scan(0) == 1
    finally:
        client.close()
        conn.close()


@pytest.mark.parametrize("curve", [False, True], ids=["plaintext", "curve"])
def test_a_heartbeat_command_fits_the_size_the_backlog_allows(curve: bool) -> None:
    """``COMMAND_SIZE`` against libzmq's real framing: a DEALER PINGing every 10 ms adds at
    most that many bytes per PING to what a ROUTER's connection received."""
    context = zmq.Context()
    try:
        server_public, server_secret = zmq.curve_keypair()
        public, secret = zmq.curve_keypair()
        router = context.socket(zmq.ROUTER)
        if curve:
            router.curve_server = True
            router.curve_secretkey = server_secret
        port = router.bind_to_random_port("tcp://127.0.0.1")
        monitor = router.get_monitor_socket(zmq.EVENT_ACCEPTED | zmq.EVENT_HANDSHAKE_SUCCEEDED)
        fds = context.socket(zmq.DEALER)
        if curve:
            fds.curve_serverkey, fds.curve_publickey = server_public, public
            fds.curve_secretkey = secret
        fds.setsockopt(zmq.HEARTBEAT_IVL, 10)  # a peer link's PINGs, 50 times as often
        fds.connect(f"tcp://127.0.0.1:{port}")
        assert monitor.poll(5000), "no connection"
        fd = parse_monitor_message(monitor.recv_multipart())["value"]  # accepted: its fd
        assert monitor.poll(5000), "no handshake"
        monitor.recv_multipart()
        time.sleep(0.1)
        first, start = bytes_received(fd), time.monotonic()
        time.sleep(1.0)
        added, elapsed = (bytes_received(fd) or 0) - (first or 0), time.monotonic() - start
        pings = elapsed / 0.010
        print(f"{added} bytes over {elapsed:.2f} s: {added / pings:.1f} per PING")
        assert 0 < added <= COMMAND_SIZE * pings * 1.05
    finally:
        context.destroy(linger=0)


def test_the_loop_tracks_a_connection_before_its_accept_event_and_the_event_changes_nothing(
    server: socket.socket,
) -> None:
    """A quota asks about a connection whose accept event the monitor thread has not
    handled yet: ``track`` registers it there and then; the event, when it comes, neither
    registers it twice nor moves its baseline."""
    guard = ConnectionBacklog(1 << 20, 0, PeerMetrics().connections_shed, owner="t",
                              per_address=1)
    client = socket.create_connection(server.getsockname())
    conn = server.accept()[0]
    try:
        assert guard.identity(conn.fileno()) is None
        inode = guard.track(conn.fileno())
        assert inode is not None and guard.identity(conn.fileno()) == inode
        baseline = guard.backlog(conn.fileno())
        client.sendall(b"x" * 1000)
        _received(conn, 1000)
        guard.accepted(conn.fileno())  # the late event: per_address=1 is not exceeded
        assert guard.connections == 1
        assert guard.backlog(conn.fileno()) == (baseline or 0) + 1000
        guard.closed(conn.fileno())
        assert guard.connections == 0 and guard.track(-1) is None
    finally:
        client.close()
        conn.close()


def test_the_broadcast_caps_shed_under_reasons_of_their_own(server: socket.socket) -> None:
    """The PUB's caps (``RouterLimits.broadcast``) count apart from the ROUTER's; the
    default cap is an eighth of the descriptors."""
    shed = PeerMetrics().connections_shed
    guard = ConnectionBacklog(1 << 62, 0, shed, owner="t", max_connections=1,
                              scope="broadcast_")
    clients = [socket.create_connection(server.getsockname()) for _ in range(2)]
    accepted = [server.accept()[0] for _ in range(2)]
    try:
        guard.accepted(accepted[0].fileno())
        guard.accepted(accepted[1].fileno())  # over the cap: the oldest goes
        clients[0].settimeout(2)
        assert clients[0].recv(1) == b""
        assert {labels: v.value for labels, v in shed.series()} == {
            ("broadcast_max_connections",): 1}
    finally:
        for sock in clients + accepted:
            sock.close()
    assert subscriber_cap(20_000) == 2_500 and subscriber_cap(64) == 16
