"""Forged RequestVotes at the top of the term space never leave the cluster leaderless
(issue #24, finding 3), with the production defaults (spiral guard, leader stickiness) and
random timeouts and delays; the invariant checker runs throughout. Deterministic (seeds).

Before: one forged RequestVote per peer with term 2^48-1 was adopted and persisted, and a
peer at that term refuses to campaign, so no leader was ever elected again.
"""

from __future__ import annotations

from random import Random

import pytest

from raftlog.bounds import MAX_TERM
from raftlog.consensus import CoreConfig
from raftlog.consensus.results import Appended
from raftlog.ids import make_request_id
from raftlog.rpc.messages import RequestVote
from sim.cluster import SimCluster
from sim.invariants import Invariants
from sim.network import LinkRule
from sim.tracing import Trace

IDS = ["n0", "n1", "n2"]
FORGED_TERMS = (MAX_TERM, MAX_TERM - 1, 2**53 - 1)
SMALL = 1_000


def _forge(cluster: SimCluster, serial: int) -> int:
    """Every live peer gets a forged RequestVote per term in the name of each other peer."""
    for target in IDS:
        for candidate in IDS:
            if candidate == target:
                continue
            for term in FORGED_TERMS:
                serial += 1
                vote = RequestVote(candidate, term, 2**48 - 1, term)
                cluster.network.send(cluster.tick, candidate, target, ("req", -1, serial, vote))
    return serial


@pytest.mark.parametrize("seed", range(4))
def test_forged_top_terms_leave_a_cluster_that_elects_and_commits(seed: int) -> None:
    cluster = SimCluster(IDS, IDS, Random(seed), LinkRule(delay=(1, 3)), Trace(), CoreConfig)
    invariants = Invariants(cluster, full_check_every=25)
    cluster.start_all()

    def run(ticks: int) -> None:
        for _ in range(ticks):
            cluster.step()
            invariants.check(cluster.tick)

    run(300)
    serial = _forge(cluster, 1_000_000)  # while a leader is heard
    run(50)
    leader = cluster.leader()
    assert leader is not None
    cluster.crash(leader.id)  # and while nobody leads
    serial = _forge(cluster, serial)
    run(20)
    serial = _forge(cluster, serial)
    cluster.restart(leader.id)
    for round_no in range(2):
        run(600)
        leader = cluster.leader()
        assert leader is not None and leader.core is not None, cluster.trace.render()
        rid = make_request_id(cluster.now_ms // 1000, b"\x24\x00\x01", 1, round_no)
        result = leader.core.propose(rid, b"after forgery", cluster.now_ms)
        assert isinstance(result, Appended)
        cluster.drain(leader)
        run(100)
        for node in cluster.nodes.values():
            assert node.core is not None and node.core.term < SMALL
            assert node.core.commit_index >= result.index
        serial = _forge(cluster, serial)
