"""A follower on a one-way link never campaigns against a healthy leader (issue #12, finding 3).

The follower receives everything the leader sends; its answers are lost. A stop-and-wait
leader (the default, as the reference) then sends nothing but retransmissions of the one
outstanding request. Two things used to make the follower campaign within half a second, and
depose the leader with its higher term once the link healed:

* the leader's retransmission backoff stretched the resend interval to 560 ms and more, past
  the follower's election timeout (the resend is the follower's only heartbeat);
* the follower's driver answers a retransmission (same msgid) from its debounce cache without
  stepping the core, so its election timer never heard of it.

``DebouncingCluster`` models the real transport and driver for the second point: the very same
request object goes out under the same msgid (``PeerChannel.send``), and the receiver answers
a repeat of the last (sender, msgid) from a cache and calls ``heard_from_leader``, as
``PeerService.from_leader`` does. Everything is deterministic (fixed seeds).
"""

from __future__ import annotations

from random import Random

import pytest

from raftlog.consensus import CoreConfig, Role
from raftlog.consensus.results import Appended
from raftlog.ids import make_request_id
from raftlog.rpc.messages import AppendEntries, InstallSnapshot, PeerRequest, PeerResponse
from sim.cluster import SimCluster, SimNode
from sim.invariants import Invariants
from sim.network import LinkRule
from sim.tracing import Trace

IDS = ["n0", "n1", "n2"]


class DebouncingCluster(SimCluster):
    """SimCluster with the peer service's msgid reuse and receiver debounce."""

    def __init__(self, seed: int) -> None:
        super().__init__(IDS, IDS, Random(seed), LinkRule(delay=(1, 2)), Trace(), CoreConfig)
        self.last_sent: dict[tuple[str, str], tuple[PeerRequest, int]] = {}
        self.debounce: dict[tuple[str, str], tuple[int, int, object | None]] = {}
        """(receiver, leader id) -> (incarnation, msgid, cached reply) of the last request."""
        self.heard = 0

    def send_request(self, node: SimNode, to: str, message: PeerRequest) -> None:
        last = self.last_sent.get((node.id, to))
        if last is not None and last[0] is message:  # retransmission: same msgid
            msgid = last[1]
            node.pending[msgid] = (to, message)
            payload = ("req", node.incarnation, msgid, message)
            self.network.send(self.tick, node.id, to, payload)
            return
        super().send_request(node, to, message)
        self.last_sent[(node.id, to)] = (message, node.next_msgid)

    def send_reply(self, node: SimNode, token: object, message: PeerResponse) -> None:
        incarnation, msgid = token.incarnation, token.msgid  # type: ignore[attr-defined]
        for key, (inc, mid, _) in list(self.debounce.items()):
            if key[0] == node.id and (inc, mid) == (incarnation, msgid):
                self.debounce[key] = (inc, mid, message)
        super().send_reply(node, token, message)

    def deliver(self, src: str, dst: str, payload: object) -> None:
        kind, incarnation, msgid, message = payload  # type: ignore[misc]
        node = self.nodes[dst]
        if (
            kind == "req"
            and node.core is not None
            and isinstance(message, AppendEntries | InstallSnapshot)
        ):
            key = (dst, message.leader_id)
            last = self.debounce.get(key)
            if last is not None and last[:2] == (incarnation, msgid):
                self.heard += 1
                node.core.heard_from_leader(message.leader_id, message.term)
                if last[2] is not None:
                    self.network.send(self.tick, dst, src, ("resp", incarnation, msgid, last[2]))
                return
            self.debounce[key] = (incarnation, msgid, None)
        super().deliver(src, dst, payload)


def _propose(cluster: SimCluster, leader: SimNode, n: int) -> None:
    assert leader.core is not None
    rid = make_request_id(cluster.now_ms // 1000, b"\x0a\x0b\x0c", 1, n)
    result = leader.core.propose(rid, b"w%d" % n, cluster.now_ms)
    assert isinstance(result, Appended), result
    cluster.drain(leader)


@pytest.mark.parametrize("seed", range(6))
def test_a_follower_that_hears_its_leader_never_campaigns(seed: int) -> None:
    cluster = DebouncingCluster(seed)
    invariants = Invariants(cluster, full_check_every=50)
    cluster.start_all()

    def run(ticks: int) -> None:
        for _ in range(ticks):
            cluster.step()
            invariants.check(cluster.tick)

    run(300)  # elect and settle
    leader = cluster.leader()
    assert leader is not None and leader.core is not None
    term = leader.core.term
    follower = cluster.nodes[next(i for i in IDS if i != leader.id)]
    cluster.network.cut_one_way(follower.id, leader.id)  # its answers are lost
    for n in range(1, 1001):  # 10 s with the link cut, writes every 100 ms
        if n % 10 == 0:
            _propose(cluster, leader, n)
        run(1)
        assert follower.core is not None
        assert follower.core.role is Role.FOLLOWER, (
            f"seed {seed}: {follower.id} campaigned {n} ticks into the one-way cut\n"
            + cluster.trace.render()
        )
    cluster.network.heal()
    run(300)
    assert cluster.leader() is leader and leader.core.term == term  # never deposed
    assert all(node.core is not None and node.core.term == term for node in cluster.nodes.values())
    assert follower.core is not None
    assert follower.core.commit_index == leader.core.commit_index  # it caught up
    assert cluster.heard > 0  # the debounce path was exercised
