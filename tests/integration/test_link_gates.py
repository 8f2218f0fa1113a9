"""The link gates that stand in for ``ZMQ_IMMEDIATE`` (which made libzmq abort a reader
whose sender died mid-message; ``raftlog.sockets``, ``test_reconnect_abort.py``): nothing is
queued for a peer that is not connected, so nothing stale reaches it when it comes back; a
live connection sends; a dropped one closes the gate again. Real sockets on loopback."""

from __future__ import annotations

import asyncio
from collections.abc import MutableMapping
from typing import Any

import zmq
import zmq.asyncio
from structlog.testing import capture_logs

from integration.cluster import free_ports
from integration.link_waits import link_is
from raftlog import sockets
from raftlog.client.dealer import DealerChannel, Waiters
from raftlog.log import get_logger
from raftlog.metrics import PeerMetrics
from raftlog.rpc.codec import decode_request
from raftlog.rpc.messages import Peer, RequestVote
from raftlog.server.peers import PeerChannels


def _free_tcp_url() -> str:
    [port] = free_ports(1)  # not an ephemeral port: nothing else takes it before the bind
    return f"tcp://127.0.0.1:{port}"


def _link_events(logged: list[MutableMapping[str, Any]]) -> list[tuple[object, object]]:
    return [(e["event"], e["peer"]) for e in logged if str(e["event"]).startswith("peer_link")]


def _wait_link(channels: PeerChannels, poller: zmq.Poller, peer_id: str, up: bool) -> None:
    if not link_is(peer_id, up, channels, poller, 10.0):
        raise AssertionError(f"the link to {peer_id} never went {'up' if up else 'down'}")


def test_nothing_is_queued_for_a_peer_whose_link_is_down() -> None:
    """The link gate (what ``ZMQ_IMMEDIATE`` did before it aborted readers, raftlog.sockets):
    a request sent while the other peer is down is dropped and counted, never delivered late
    to the peer when it comes back; once the handshake is done requests go out; when the
    connection drops the gate closes again. ``raftlog_peer_link_up`` follows the gate,
    ``raftlog_peer_requests_dropped`` counts, and each change is logged once."""
    context: zmq.Context[zmq.Socket[bytes]] = zmq.Context.instance()
    poller = zmq.Poller()
    metrics, log = PeerMetrics(), get_logger(peer_id="n1")
    channels = PeerChannels(context, "n1", b"cluster", 50, poller, metrics=metrics, log=log)
    url = _free_tcp_url()
    channels.reconcile([Peer("n2", url)])
    channel = channels.by_id["n2"]
    link_up = metrics.peer_link_up.labels(peer="n2")
    dropped = metrics.peer_requests_dropped.labels(peer="n2")
    with capture_logs() as logged:
        router = None
        try:
            assert not channel.link_up and link_up.value == 0
            assert channels.link_states() == {"n2": False}  # the status page's column
            stale = RequestVote("n1", 1, 0, 0)
            channels.send("n2", stale)
            assert dropped.value == 1
            router = sockets.peer_router(context, url, max_message_size=1 << 20)
            _wait_link(channels, poller, "n2", up=True)
            assert link_up.value == 1 and _link_events(logged) == [("peer_link_up", "n2")]
            assert channels.link_states() == {"n2": True}
            fresh = RequestVote("n1", 2, 0, 0)
            channels.send("n2", fresh)
            assert router.poll(5000), "the request sent on a live link did not arrive"
            assert decode_request(router.recv_multipart()[1:]).message == fresh
            assert not router.poll(200), "the request sent while the link was down arrived late"
            router.close(linger=0)
            router = None
            _wait_link(channels, poller, "n2", up=False)
            channels.send("n2", RequestVote("n1", 3, 0, 0))
            assert dropped.value == 2
            assert link_up.value == 0 and channels.link_states() == {"n2": False}
            assert _link_events(logged) == [("peer_link_up", "n2"), ("peer_link_down", "n2")]
        finally:
            channels.close()
            if router is not None:
                router.close(linger=0)
    assert not list(metrics.peer_link_up.samples()), "a closed channel's link is still shown"


async def _gate_scenario(url: str) -> None:
    context = zmq.asyncio.Context()
    channel = DealerChannel(context, url, Waiters())
    router: zmq.Socket[bytes] | None = None
    try:
        assert not await channel.send([b"\x01", b"stale"], 0.3), "sent to a peer that is down"
        assert not channel.send_nowait([b"\x02", b"stale"])
        router = zmq.Context.instance().socket(zmq.ROUTER)
        router.setsockopt(zmq.LINGER, 0)
        router.bind(url)
        assert await channel.send([b"\x03", b"fresh"], 10.0), "not sent on a live connection"
        assert router.poll(5000)
        assert router.recv_multipart()[1:] == [b"\x03", b"fresh"]
        assert not router.poll(200), "a request refused while the peer was down arrived late"
        router.close()
        router = None
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 10.0
        while channel.state.connected and loop.time() < deadline:
            await asyncio.sleep(0.01)
        assert not await channel.send([b"\x04", b"stale"], 0.1), "sent on a dropped connection"
    finally:
        if router is not None:
            router.close()
        await channel.aclose()
        context.term()


def test_a_send_waits_for_the_connection_and_nothing_waits_in_a_queue() -> None:
    """The channel's gate (what ``ZMQ_IMMEDIATE`` did before it aborted readers, see
    ``raftlog.sockets``): a send to a peer that is down waits and gives up, and what it gave
    up on is not delivered later; on a live connection it goes out; after a drop it waits."""
    asyncio.run(_gate_scenario(_free_tcp_url()))
