"""A client that vanishes without a word -- its host powered off, a partition, a NAT that
forgot the mapping -- leaves an idle TCP connection that the kernel never closes (nothing in
flight, no keepalive). The peer's ZMTP heartbeats on the connections it serves
(``connection_heartbeat_interval`` / ``_timeout``, ``raftlog.sockets.ServedHeartbeats``)
close it, on its ROUTER and on its PUB broadcast, and their time-to-live makes the client's
own libzmq close its end when the peer goes silent.

What the dead connection costs without them (the negative controls, heartbeats off): a
principal whose connections quota it holds is locked out for good -- here a client at
127.0.0.2 with ``connections = 1`` whose first connection went silent gets no answer on a new
one -- and the connection, a subscriber's included, stays open on the peer.

The silence is ``integration.silent_relay``: the client talks to the peer through a relay
whose upstream connections come from 127.0.0.2, and which at some point stops moving bytes
without closing anything.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import zmq
from zmq.utils.monitor import parse_monitor_message

from integration.cluster import PeerCluster, free_ports, probe, wait_for
from integration.silent_relay import SilentRelay
from raftlog.rpc.messages import RequestLogInfo, RequestLogInfoResponse
from raftlog.rpc.request_encoders import encode_request
from raftlog.rpc.response_decoders import decode_response

pytestmark = pytest.mark.timeout(120)

HEARTBEATS = {"connection_heartbeat_interval": 200, "connection_heartbeat_timeout": 600}
"""Short, so that the test waits ~1 s where the defaults (10 s / 30 s) take ~40 s."""
SOURCE = "127.0.0.2"
"""The clients' address (127.0.0.1 is the member's own, never limited)."""
CLOSE_BOUND = 20.0
"""Seconds the heartbeats may take to close a silent connection on a loaded machine (they
need interval + timeout, 0.8 s)."""
CONTROL_WAIT = 4.0
"""Seconds the negative controls watch a silent connection stay open: five times what the
heartbeats take."""
_CTX = zmq.Context.instance()


def _cluster(directory: Path, raft: dict[str, int]) -> Iterator[PeerCluster]:
    with PeerCluster(directory, ids=("1",), ident="raftlog-dead", raft=raft) as running:
        with running.config_path.open("a") as config:
            config.write("[quotas]\nconnections = 1\n")
        running.start()
        running.wait_leader()
        yield running


@pytest.fixture(scope="module")
def beating(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PeerCluster]:
    yield from _cluster(tmp_path_factory.mktemp("dead-on"), HEARTBEATS)


@pytest.fixture(scope="module")
def silent(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PeerCluster]:
    yield from _cluster(tmp_path_factory.mktemp("dead-off"), {"connection_heartbeat_interval": 0})


def _port(url: str) -> int:
    return int(url.rsplit(":", 1)[1])


def _relay_to(url: str) -> tuple[SilentRelay, str]:
    port = free_ports(1)[0]
    return SilentRelay(port, _port(url), source=SOURCE), f"tcp://127.0.0.1:{port}"


def _answered(cluster: PeerCluster, url: str) -> bool:
    got = probe(url, cluster.ident, RequestLogInfo(), timeout=1.0)
    return bool(got) and isinstance(got[0], RequestLogInfoResponse)


def _talking_client(cluster: PeerCluster, relay_url: str) -> zmq.Socket[bytes]:
    """A plain DEALER (libzmq's defaults: no heartbeats of its own) through the relay that
    has been answered once -- a connection that talked, so no connection cap sheds it as
    idle -- with a monitor of its connection events (:func:`_closed_by_ttl`)."""
    sock = _CTX.socket(zmq.DEALER)
    sock.setsockopt(zmq.LINGER, 0)
    sock.monitor(f"inproc://dead-{id(sock)}", zmq.EVENT_DISCONNECTED)
    sock.connect(relay_url)
    frames = encode_request(RequestLogInfo(), ident=cluster.ident.encode(), id=b"\x01")
    sock.send_multipart(frames)
    assert sock.poll(10_000), "the client through the relay got no answer"
    _, answer = decode_response(frames[1], sock.recv_multipart())
    assert isinstance(answer, RequestLogInfoResponse)
    return sock


def _monitor(sock: zmq.Socket[bytes]) -> zmq.Socket[bytes]:
    monitor = _CTX.socket(zmq.PAIR)
    monitor.connect(f"inproc://dead-{id(sock)}")
    return monitor


def test_a_vanished_clients_connection_is_closed_and_its_quota_freed(
    beating: PeerCluster,
) -> None:
    relay, relay_url = _relay_to(beating.peers["1"].url)
    client = _talking_client(beating, relay_url)
    monitor = _monitor(client)
    try:
        answered = relay.to_clients
        wait_for("a PING of the peer to reach the client",  # it arms the time-to-live
                 lambda: relay.to_clients > answered, CLOSE_BOUND)
        relay.silent.set()
        went_silent = time.monotonic()
        wait_for("the peer to close a silent client's connection",
                 lambda: relay.upstream_closed() == 1, CLOSE_BOUND)
        print(f"closed by the peer {time.monotonic() - went_silent:.2f} s after the silence")
        source_url = f"tcp://{SOURCE}:0;{beating.peers['1'].url.removeprefix('tcp://')}"
        wait_for("a new connection of the same principal to be answered",
                 lambda: _answered(beating, source_url), CLOSE_BOUND)
        # the client's own libzmq closed its end too: the peer's PINGs carry a time-to-live
        wait_for("the client to close its end", lambda: relay.clients_closed() == 1, CLOSE_BOUND)
        assert monitor.poll(1000), "no disconnection event on the client"
        event = parse_monitor_message(monitor.recv_multipart())
        assert event["event"] == zmq.EVENT_DISCONNECTED
    finally:
        monitor.close(linger=0)
        client.close(linger=0)
        relay.close()


def test_without_heartbeats_a_vanished_client_locks_its_principal_out(
    silent: PeerCluster,
) -> None:
    """Negative control: heartbeats off, the dead connection holds the principal's one
    connection, every new one is refused (a reference-style request dropped unanswered),
    and neither end closes."""
    relay, relay_url = _relay_to(silent.peers["1"].url)
    client = _talking_client(silent, relay_url)
    monitor = _monitor(client)
    try:
        relay.silent.set()
        source_url = f"tcp://{SOURCE}:0;{silent.peers['1'].url.removeprefix('tcp://')}"
        deadline = time.monotonic() + CONTROL_WAIT
        while time.monotonic() < deadline:
            assert not _answered(silent, source_url), "admitted beside the dead connection"
        assert relay.upstream_closed() == 0 and relay.clients_closed() == 0
        assert not monitor.poll(0)
    finally:
        monitor.close(linger=0)
        client.close(linger=0)
        relay.close()


def _subscriber(cluster: PeerCluster) -> tuple[SilentRelay, zmq.Socket[bytes]]:
    """A SUB through a relay to the peer's broadcast, subscribed and receiving (the leader
    publishes a heartbeat every ``broadcast_heartbeat_interval``)."""
    relay, relay_url = _relay_to(cluster.peers["1"].pub_url)
    sub = _CTX.socket(zmq.SUB)
    sub.setsockopt(zmq.LINGER, 0)
    sub.setsockopt(zmq.SUBSCRIBE, b"")
    sub.connect(relay_url)
    assert sub.poll(10_000), "the subscriber received nothing"
    return relay, sub


def test_a_vanished_subscriber_is_dropped_from_the_broadcast(beating: PeerCluster) -> None:
    relay, sub = _subscriber(beating)
    try:
        relay.silent.set()
        wait_for("the broadcast to drop a silent subscriber",
                 lambda: relay.upstream_closed() == 1, CLOSE_BOUND)
    finally:
        sub.close(linger=0)
        relay.close()


def test_without_heartbeats_a_vanished_subscriber_stays(silent: PeerCluster) -> None:
    """Negative control: the same silence, heartbeats off: the PUB keeps the connection
    (and would queue up to its high-water mark for it)."""
    relay, sub = _subscriber(silent)
    try:
        relay.silent.set()
        deadline = time.monotonic() + CONTROL_WAIT
        while time.monotonic() < deadline:
            assert relay.upstream_closed() == 0, "closed without heartbeats"
            time.sleep(0.1)
    finally:
        sub.close(linger=0)
        relay.close()
