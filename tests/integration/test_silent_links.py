"""A peer link that goes *silent* -- the TCP connection stays open, nothing comes back (a
firewall or partition dropping packets, a paused or hung host) -- closes its link gate by the
ZMTP heartbeats of ``raftlog.sockets.peer_dealer``, and opens again when the silence ends.
Without them the gate, ``raftlog_peer_link_up`` and the status page say "up" until TCP gives
up, minutes later, and requests queue for the peer meanwhile (the negative control below).

The silence is a relay on loopback that stops forwarding (it neither reads nor closes), so
the heartbeats' PINGs and PONGs are lost like everything else (``integration.silent_relay``).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
import zmq

from integration.cluster import free_ports
from integration.link_waits import link_is
from integration.silent_relay import SilentRelay
from raftlog import sockets
from raftlog.metrics import PeerMetrics
from raftlog.rpc.codec import decode_request
from raftlog.rpc.messages import Peer, RequestVote
from raftlog.server.peers import PeerChannels


@contextmanager
def _linked_channel(
    metrics: PeerMetrics,
) -> Iterator[tuple[PeerChannels, zmq.Poller, SilentRelay, zmq.Socket[bytes]]]:
    """A ROUTER, a relay in front of it and a peer channel to the relay's port, linked up."""
    context: zmq.Context[zmq.Socket[bytes]] = zmq.Context.instance()
    relay_port, router_port = free_ports(2)
    router = sockets.peer_router(
        context, f"tcp://127.0.0.1:{router_port}", max_message_size=1 << 20
    )
    relay = SilentRelay(relay_port, router_port)
    poller = zmq.Poller()
    channels = PeerChannels(context, "n1", b"cluster", 50, poller, metrics=metrics)
    try:
        channels.reconcile([Peer("n2", f"tcp://127.0.0.1:{relay_port}")])
        assert link_is("n2", True, channels, poller, 10.0), "the link never came up"
        yield channels, poller, relay, router
    finally:
        channels.close()
        relay.close()
        router.close(linger=0)


def test_a_silent_link_closes_its_gate_and_opens_when_the_silence_ends() -> None:
    metrics = PeerMetrics()
    dropped = metrics.peer_requests_dropped.labels(peer="n2")
    with _linked_channel(metrics) as (channels, poller, relay, router):
        channels.send("n2", RequestVote("n1", 1, 0, 0))
        assert router.poll(5000), "a request on the live link did not arrive"
        router.recv_multipart()
        relay.silent.set()
        went_silent = time.monotonic()
        # heartbeat interval + timeout is 2 s; the bound is generous for a loaded machine
        assert link_is("n2", False, channels, poller, 20.0), "a silent link stayed up"
        print(f"link down {time.monotonic() - went_silent:.2f} s after the silence began")
        channels.send("n2", RequestVote("n1", 2, 0, 0))
        assert dropped.value == 1, "a request was queued for a silent peer"
        assert metrics.peer_link_up.labels(peer="n2").value == 0
        relay.silent.clear()
        assert link_is("n2", True, channels, poller, 20.0), "the link never came back"
        fresh = RequestVote("n1", 3, 0, 0)
        channels.send("n2", fresh)
        assert router.poll(5000), "a request after the silence did not arrive"
        assert decode_request(router.recv_multipart()[1:]).message == fresh
        assert not router.poll(300), "a request from the silence arrived late"


def test_without_heartbeats_a_silent_link_looks_up(monkeypatch: pytest.MonkeyPatch) -> None:
    """Negative control: the same silence with the heartbeats off leaves the gate open
    well past the time the test above allows, and a request is queued, not dropped."""
    monkeypatch.setattr(sockets, "PEER_HEARTBEAT_IVL_MS", 0)
    monkeypatch.setattr(sockets, "PEER_HEARTBEAT_TIMEOUT_MS", 0)  # connect: the OS's own
    metrics = PeerMetrics()
    with _linked_channel(metrics) as (channels, poller, relay, _):
        relay.silent.set()
        # three times what the heartbeats take (0.5 s interval + 1.5 s timeout)
        assert not link_is("n2", False, channels, poller, 6.0), "down without heartbeats"
        channels.send("n2", RequestVote("n1", 1, 0, 0))
        assert metrics.peer_requests_dropped.labels(peer="n2").value == 0
