"""A client that vanishes without a word -- its host powered off, a partition, a NAT that
forgot the mapping -- leaves an idle TCP connection that the kernel never closes (nothing in
flight, no keepalive): it would hold a connection slot and a principal's connections quota
for good. ``dead_connection_timeout`` turns TCP keepalive on for every connection the peer
serves (``raftlog.sockets.ServedKeepalive``), on its ROUTER and on its PUB broadcast, so the
kernel probes an idle connection after half of it and closes it after three unanswered
probes.

Dropping a host's packets on loopback needs a firewall this machine does not have, and the
kernel's probes are the kernel's; what is ours, and tested here, is that the peer's side of
each served connection carries the keepalive timer with the configured idle time (the
kernel's table, ``/proc/net/tcp``: timer 2 is keepalive), and that without the option it
carries none (the negative control: the connection would stay for good).
"""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import zmq

from integration import tcp_table
from integration.cluster import PeerCluster, wait_for
from raftlog.rpc.messages import RequestLogInfo, RequestLogInfoResponse
from raftlog.rpc.request_encoders import encode_request
from raftlog.rpc.response_decoders import decode_response

pytestmark = pytest.mark.timeout(120)

TIMEOUT_MS = 12_000
"""The option under test: probes after 6 s idle, every 2 s, closed after three."""
_CTX = zmq.Context.instance()


def _cluster(directory: Path, raft: dict[str, int]) -> Iterator[PeerCluster]:
    with PeerCluster(directory, ids=("1",), ident="raftlog-dead", raft=raft) as running:
        running.start()
        running.wait_leader()
        yield running


@pytest.fixture(scope="module")
def probed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PeerCluster]:
    yield from _cluster(tmp_path_factory.mktemp("dead-on"), {"dead_connection_timeout": TIMEOUT_MS})


@pytest.fixture(scope="module")
def unprobed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PeerCluster]:
    yield from _cluster(tmp_path_factory.mktemp("dead-off"), {"dead_connection_timeout": 0})


def _port(url: str) -> int:
    return int(url.rsplit(":", 1)[1])


def _client_port(server_port: int) -> int:
    """The local port of this test's one TCP connection to ``server_port`` (the table)."""
    def find() -> int | None:
        mine = [row for row in tcp_table.established() if row.remote[1] == server_port]
        return mine[0].local[1] if mine else None

    return wait_for("the client's connection", find, 10.0)


def _talking_client(cluster: PeerCluster) -> tuple[zmq.Socket[bytes], int]:
    """A DEALER answered once by the peer; and its connection's local port."""
    sock = _CTX.socket(zmq.DEALER)
    sock.setsockopt(zmq.LINGER, 0)
    url = cluster.peers["1"].url
    sock.connect(url)
    frames = encode_request(RequestLogInfo(), ident=cluster.ident.encode(), id=b"\x01")
    sock.send_multipart(frames)
    assert sock.poll(10_000), "no answer"
    _, answer = decode_response(frames[1], sock.recv_multipart())
    assert isinstance(answer, RequestLogInfoResponse)
    return sock, _client_port(_port(url))


def _subscriber(cluster: PeerCluster) -> tuple[socket.socket, int]:
    """A plain TCP connection to the PUB port (the keepalive is the kernel's: no ZMTP needed
    to see it); and its local port."""
    sock = socket.create_connection(("127.0.0.1", _port(cluster.peers["1"].pub_url)))
    return sock, int(sock.getsockname()[1])


def _kind_becomes(server_port: int, client_port: int, kind: int) -> tcp_table.TcpRow:
    """The peer's side of the connection once its timer is of ``kind`` (a timer 1,
    retransmission, may show while an answer or a broadcast is in flight)."""
    def seen() -> tcp_table.TcpRow | None:
        row = tcp_table.connection(server_port, remote_port=client_port)
        return row if row is not None and row.timer == kind else None

    return wait_for(f"timer {kind} on the peer's side of port {server_port}", seen, 10.0)


def test_served_connections_are_probed_once_idle(probed: PeerCluster) -> None:
    client, client_port = _talking_client(probed)
    sub, sub_port = _subscriber(probed)
    try:
        idle_ticks = TIMEOUT_MS // 2 // 1000 * tcp_table.USER_HZ
        for server_port, port in ((_port(probed.peers["1"].url), client_port),
                                  (_port(probed.peers["1"].pub_url), sub_port)):
            when = _kind_becomes(server_port, port, tcp_table.KEEPALIVE).when
            assert 0 < when <= idle_ticks, f"the timer fires in {when} ticks, not within 6 s"
    finally:
        client.close(linger=0)
        sub.close()


def test_without_the_option_a_served_connection_is_never_probed(unprobed: PeerCluster) -> None:
    """Negative control: the peer's side of an idle connection has no timer at all (and
    never a keepalive one) -- a dead client's connection would stay open for good."""
    client, client_port = _talking_client(unprobed)
    sub, sub_port = _subscriber(unprobed)
    try:
        for server_port, port in ((_port(unprobed.peers["1"].url), client_port),
                                  (_port(unprobed.peers["1"].pub_url), sub_port)):
            _kind_becomes(server_port, port, 0)
            deadline = time.monotonic() + 1.0
            while time.monotonic() < deadline:
                row = tcp_table.connection(server_port, remote_port=port)
                assert row is not None and row.timer != tcp_table.KEEPALIVE, (
                    "keepalive without the option")
                time.sleep(0.05)
    finally:
        client.close(linger=0)
        sub.close()
