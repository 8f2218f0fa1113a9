"""Waiting for a peer channel's link gate in tests that drive ``PeerChannels`` without a
peer's loop: the poll and the fold of monitor events the loop would do
(``PeerNode.drain_inputs`` -> ``PeerChannels.read_link_events``)."""

from __future__ import annotations

import time

import zmq

from raftlog.server.peers import PeerChannels


def link_is(
    peer_id: str, up: bool, channels: PeerChannels, poller: zmq.Poller, within: float
) -> bool:
    """Fold link events for up to ``within`` seconds; True once the gate reads ``up``, False
    if it never did (a negative control asserts that)."""
    deadline = time.monotonic() + within
    while channels.by_id[peer_id].link_up is not up:
        if time.monotonic() >= deadline:
            return False
        for sock, _ in poller.poll(50):
            channels.read_link_events(sock)
    return True
