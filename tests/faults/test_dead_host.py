"""A client host that dies without a word keeps no slot on the peer: end to end, with a real
dead host.

The client runs in a network namespace of its own (``faults.netns_host``) and talks to a
single peer whose cluster file gives every source address one connection
(``[quotas] connections = 1``). It is answered once, then its host vanishes (its address
taken away: nothing reaches it, nothing leaves it, its FIN is lost) and later reboots with
the same address and none of its old connections, as a machine that lost power. With
``dead_connection_timeout`` (3 s here) the peer's kernel probes the idle
connection, nobody answers, the connection is closed, and a new client from the same
address is answered. Negative control, the option off: the dead connection stays on the
peer and holds the address's one connection, so every new client from there is refused --
for good, since nothing would ever end it.

Keepalive probes only idle connections. A host that dies with data on its way to it -- here
the answer of a waiting topic read, sent after the host vanished -- was left to TCP's
retransmission limit (~15 minutes, the answers queued meanwhile); ``TCP_MAXRT`` closes it
within the same timeout. Without that option (``keepalive`` alone, the code before) the
connection was still there, its data unacknowledged, after ``CONTROL_WAIT``.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from integration import tcp_table
from integration.cluster import PeerCluster, wait_for
from integration.kafka.helpers import native

from faults.netns_host import OtherHost, netns_or_skip
from raftlog.topics.records import Record
from raftlog.topics.wire import MAX_READ_WAIT_MS

pytestmark = pytest.mark.timeout(180)

CLIENT = r"""
import sys
import zmq
from raftlog.rpc.messages import RequestLogInfo
from raftlog.rpc.request_encoders import encode_request
url, ident, hold = sys.argv[1], sys.argv[2], sys.argv[3] == "hold"
sock = zmq.Context.instance().socket(zmq.DEALER)
sock.setsockopt(zmq.LINGER, 0)
sock.connect(url)
sock.send_multipart(encode_request(RequestLogInfo(), ident=ident.encode(), id=b"\x01"))
print("answered" if sock.poll(2000) else "silent", flush=True)
if hold:
    sys.stdin.read()  # until killed
"""
WAITING_READER = r"""
import sys
import zmq
from raftlog.rpc.messages import ClientDispatch
from raftlog.rpc.request_encoders import encode_request
from raftlog.topics import wire
url, ident, topic, wait = sys.argv[1], sys.argv[2].encode(), sys.argv[3], int(sys.argv[4])
sock = zmq.Context.instance().socket(zmq.DEALER)
sock.setsockopt(zmq.LINGER, 0)
sock.connect(url)
args = tuple(wire.encode_read_request(wire.ReadRequest(topic, wait_ms=wait)))
sock.send_multipart(encode_request(ClientDispatch(wire.TYPE_READ, args), ident=ident,
                                   id=b"\x01"))
print("waiting", flush=True)
sys.stdin.read()  # until killed: the answer comes after the host is gone
"""
ANSWER = 1024 * 1024
"""Bytes of the record whose answer is on its way when the host is dead."""
CLOSE_BOUND = 30.0
"""Seconds the dead connection may take to go with the option (3 s, plus a loaded host)."""
CONTROL_WAIT = 10.0
"""Seconds the negative control watches the dead connection stay."""


def _peer(directory: Path, timeout_ms: int) -> tuple[PeerCluster, int]:
    cluster = PeerCluster(directory, ids=("1",), ident="raftlog-deadhost",
                          raft={"dead_connection_timeout": timeout_ms})
    port = int(cluster.peers["1"].url.rsplit(":", 1)[1])
    cluster.peers["1"].bind_url = f"tcp://0.0.0.0:{port}"  # loopback and the veth
    cluster.write_config()
    with cluster.config_path.open("a") as config:
        config.write("[quotas]\nconnections = 1\n")
    return cluster, port


def _ask(host: OtherHost, url: str, ident: str) -> str:
    client = host.python("-c", CLIENT, url, ident, "once")
    out, _ = client.communicate(timeout=30)
    return out.strip()


def _established(port: int, remote: str) -> bool:
    return tcp_table.connection(port, remote_ip=remote) is not None


def _idle(port: int, remote: str) -> bool:
    """Established with nothing sent and unacknowledged (keepalive probes only idle ones;
    data in flight to a dead host is TCP's retransmission limit's, ~15 minutes)."""
    row = tcp_table.connection(port, remote_ip=remote)
    return row is not None and row.unacked == 0


@pytest.fixture
def host() -> Iterator[OtherHost]:
    with netns_or_skip() as made:
        yield made


def _dead_client(cluster: PeerCluster, host: OtherHost, url: str) -> None:
    """A client from ``host`` answered once, then its host vanishes (the process killed
    after its address went: its FIN cannot leave)."""
    held = host.python("-c", CLIENT, url, cluster.ident, "hold")
    assert held.stdout is not None
    assert held.stdout.readline().strip() == "answered"
    port = int(url.rsplit(":", 1)[1])
    wait_for("the connection to be idle", lambda: _idle(port, host.address), 10.0)
    host.vanish()
    held.kill()
    held.communicate(timeout=10)


@contextmanager
def _running(tmp_path: Path, host: OtherHost,
             timeout_ms: int) -> Iterator[tuple[PeerCluster, int, str]]:
    """The single peer started, its port, and its URL as seen from ``host``."""
    peer, port = _peer(tmp_path, timeout_ms)
    with peer as cluster:
        cluster.start()
        cluster.wait_leader()
        yield cluster, port, f"tcp://{host.local}:{port}"


def _closed_within(port: int, host: OtherHost, bound: float, since: str) -> bool:
    """Whether the peer's connection from ``host`` closes within ``bound`` seconds."""
    went = time.monotonic()
    while _established(port, host.address) and time.monotonic() - went < bound:
        time.sleep(0.2)
    gone = not _established(port, host.address)
    if gone:
        print(f"closed {time.monotonic() - went:.1f} s after {since}")
    return gone


@pytest.mark.parametrize("timeout_ms", [3000, 0], ids=["keepalive", "negative-control"])
def test_a_dead_client_host_gives_its_connection_back(
    tmp_path: Path, host: OtherHost, timeout_ms: int
) -> None:
    with _running(tmp_path, host, timeout_ms) as (cluster, port, url):
        _dead_client(cluster, host, url)
        assert _established(port, host.address), "no connection to watch"
        gone = _closed_within(port, host, CLOSE_BOUND if timeout_ms else CONTROL_WAIT,
                              "the host died")
        host.reboot()
        if timeout_ms:
            assert gone, "the peer kept a dead host's connection"
            assert _ask(host, url, cluster.ident) == "answered", "its address stayed locked"
        else:
            assert not gone, "closed without keepalive"
            assert _ask(host, url, cluster.ident) == "silent", "admitted beside it"
            assert _established(port, host.address)


@pytest.mark.parametrize("timeout_ms", [3000, 0], ids=["retransmission", "negative-control"])
def test_a_dead_host_with_answers_in_flight_gives_its_connection_back(
    tmp_path: Path, host: OtherHost, timeout_ms: int
) -> None:
    with _running(tmp_path, host, timeout_ms) as (cluster, port, url), \
            native(cluster) as topics:
        topics.create_topic("late")
        reader = host.python("-c", WAITING_READER, url, cluster.ident, "late",
                             str(MAX_READ_WAIT_MS))
        assert reader.stdout is not None and reader.stdout.readline().strip() == "waiting"
        wait_for("the read to wait, its connection idle", lambda: _idle(port, host.address),
                 10.0)
        host.vanish()
        reader.kill()
        reader.communicate(timeout=10)
        topics.publish_batch([Record("late", b"a" * ANSWER)])  # wakes the read: answered
        wait_for("the answer to be on its way", lambda: _unacked(port, host.address), 10.0)
        gone = _closed_within(port, host, CLOSE_BOUND if timeout_ms else CONTROL_WAIT,
                              "the data was sent")
        if not gone:
            assert _unacked(port, host.address), "an idle connection: not what is tested"
        host.reboot()
        if timeout_ms:
            assert gone, "the peer kept a dead host's connection with data in flight"
            assert _ask(host, url, cluster.ident) == "answered", "its address stayed locked"
        else:
            assert not gone, "closed without the option"


def _unacked(port: int, remote: str) -> bool:
    row = tcp_table.connection(port, remote_ip=remote)
    return row is not None and row.unacked > 0
