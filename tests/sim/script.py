"""Scripted simulator runs: a deterministic cluster whose elections, partitions, crashes and
disk delays are placed by hand, with the invariant checker running after every tick.

Election timeouts are effectively infinite (only ``campaign`` starts elections) and the network
delivers every message after exactly one tick, so a script reproduces one interleaving --
typically the one that turns a specific Raft mistake into a visible violation.
"""

from __future__ import annotations

from collections.abc import Callable
from random import Random

from raftlog.consensus import Bug, CoreConfig, RaftCore
from raftlog.consensus.results import Appended
from raftlog.ids import make_request_id
from raftlog.rpc.messages import PeerRequest
from sim.cluster import SimCluster, SimNode
from sim.invariants import Invariants
from sim.network import LinkRule
from sim.tracing import Trace

NEVER = 1_000_000


class Script:
    def __init__(
        self, members: int, bugs: frozenset[Bug] = frozenset(), *, inflight: int = 16
    ) -> None:
        self.trace = Trace()
        self.ids = [f"n{i}" for i in range(members)]

        def make_config(peer_id: str) -> CoreConfig:
            return CoreConfig(
                peer_id,
                election_ticks=(NEVER, NEVER),
                first_election_extra_ticks=0,
                prevent_spiral_elections=False,
                leader_stickiness=False,
                max_inflight_messages=inflight,  # pipelined (16): most scripts were written for it
                max_inflight_bytes=inflight << 16,
                bugs=bugs,
            )

        self.cluster = SimCluster(
            self.ids, self.ids, Random(0), LinkRule(delay=(1, 1)), self.trace, make_config
        )
        self.invariants = Invariants(self.cluster, full_check_every=1)
        self.proposals = 0
        self.cluster.start_all()

    # -- time -----------------------------------------------------------------------------
    def step(self, ticks: int = 1) -> None:
        for _ in range(ticks):
            self.cluster.step()
            self.invariants.check(self.cluster.tick)

    def until(self, condition: Callable[[], bool], limit: int) -> bool:
        for _ in range(limit):
            if condition():
                return True
            self.step()
        return condition()

    # -- peers ----------------------------------------------------------------------------
    def node(self, peer_id: str) -> SimNode:
        return self.cluster.nodes[peer_id]

    def core(self, peer_id: str) -> RaftCore:
        core = self.node(peer_id).core
        assert core is not None, f"{peer_id} is down"
        return core

    def leads(self, peer_id: str) -> bool:
        core = self.node(peer_id).core
        return core is not None and core.is_leader

    def campaign(self, peer_id: str) -> None:
        self.trace.add("campaign", peer_id)
        self.core(peer_id).campaign()
        self.cluster.drain(self.node(peer_id))

    def propose(self, peer_id: str, data: bytes) -> int:
        self.proposals += 1
        request_id = make_request_id(
            self.cluster.now_ms // 1000, b"\x5c\x00\x01", 1, self.proposals
        )
        result = self.core(peer_id).propose(request_id, data, self.cluster.now_ms)
        assert isinstance(result, Appended), result
        self.trace.add("propose", peer_id, result.index, data)
        self.cluster.drain(self.node(peer_id))
        return result.index

    def crash(self, peer_id: str) -> None:
        self.cluster.crash(peer_id)

    def restart(self, peer_id: str) -> None:
        self.cluster.restart(peer_id)

    def inject(self, src: str, dst: str, message: PeerRequest) -> None:
        """Hand ``dst`` a request as if ``src`` had sent it now, past the network's cuts: a
        message some other leader implementation would send (its answer is dropped)."""
        sender = self.node(src)
        sender.next_msgid += 1
        self.trace.add("inject", src, dst, message)
        self.cluster.deliver(src, dst, ("req", sender.incarnation, sender.next_msgid, message))
        self.cluster.drain(self.node(dst))

    # -- network --------------------------------------------------------------------------
    def partition(self, *groups: set[str]) -> None:
        """Exactly these groups, every other link restored."""
        self.cluster.network.heal()
        self.cluster.network.partition(*groups)
        self.trace.add("partition", *(sorted(g) for g in groups))

    def cut(self, src: str, dst: str) -> None:
        self.cluster.network.cut_one_way(src, dst)
        self.trace.add("cut", src, dst)

    def heal(self) -> None:
        self.cluster.network.heal()
        self.trace.add("heal")
