"""The reference's peers answer the ZMTP heartbeats of raftlog's peer DEALERs
(``raftlog.sockets.PEER_HEARTBEAT_IVL_MS``): a link that carries no request -- a follower's
channel to another follower while a leader is stable -- stays up. Were the PINGs not
answered, every idle link of a mixed cluster would close every 2 s and reconnect (a flapping
``raftlog_peer_link_up``, requests dropped in the gaps). npm zmq-raft's zeromq.js bundles
libzmq 4.3, which answers PING with PONG in its I/O thread (ZMTP 3.1)."""

from __future__ import annotations

import time

import zmq
from reference import ReferenceCluster

from raftlog import sockets
from raftlog.metrics import PeerMetrics
from raftlog.rpc.messages import Peer
from raftlog.server.peers import PeerChannels


def test_idle_links_to_reference_peers_stay_up(reference_cluster: ReferenceCluster) -> None:
    poller = zmq.Poller()
    channels = PeerChannels(
        zmq.Context.instance(), "raftlog", reference_cluster.ident.encode(), 50, poller,
        metrics=PeerMetrics(),
    )
    idle = 4 * (sockets.PEER_HEARTBEAT_IVL_MS + sockets.PEER_HEARTBEAT_TIMEOUT_MS) / 1000
    # every link event read once all links are up -- not only changes: a drop and a
    # reconnect folded into one read leave ``link_up`` as it was, and still count
    events: list[tuple[str, bool]] = []
    try:
        channels.reconcile(Peer(pid, url) for pid, url in reference_cluster.urls.items())
        deadline = time.monotonic() + idle + 10.0  # the first handshakes, then the idle time
        up_since: float | None = None
        while time.monotonic() < deadline:
            for sock, _ in poller.poll(50):
                channel = channels.by_monitor.get(sock)
                if channel is not None and channels.read_link_events(sock):
                    events.append((channel.peer.id, channel.link_up))
            if up_since is None and all(channels.link_states().values()):
                up_since = time.monotonic()
                events.clear()  # the handshakes themselves
                deadline = up_since + idle
        assert up_since is not None, f"never linked to every reference peer: {events}"
        assert events == [], f"idle links to reference peers flapped: {events}"
        assert all(channels.link_states().values())
    finally:
        channels.close()
