"""A peer removed from the configuration learns it and stops campaigning (issue #13 item 5).

Before, the leader stopped replicating to a removed peer the moment it appended C(new), so the
removed peer never received C(new): its last configuration was the joint one, which still had
it, and it campaigned forever against peers that drop its RequestVotes. Now the leader keeps
replicating to the departing peer until it can commit C(new); it emits ``RemovedFromCluster``
once and becomes a CLIENT. Deterministic (fixed seeds).
"""

from __future__ import annotations

from random import Random

import pytest

from raftlog.consensus import CoreConfig, RemovedFromCluster, Role
from raftlog.consensus.results import ConfigAccepted
from raftlog.ids import make_request_id
from sim.cluster import SimCluster, peer_url
from sim.invariants import Invariants
from sim.network import LinkRule
from sim.tracing import Trace

IDS = ["n0", "n1", "n2"]


@pytest.mark.parametrize("seed", range(5))
def test_a_removed_follower_is_told_and_never_campaigns(seed: int) -> None:
    cluster = SimCluster(IDS, IDS, Random(seed), LinkRule(delay=(1, 3)), Trace(), CoreConfig)
    invariants = Invariants(cluster, full_check_every=25)
    removed_events: list[str] = []
    cluster.start_all()

    def run(ticks: int) -> None:
        for _ in range(ticks):
            cluster.step()
            invariants.check(cluster.tick)

    run(300)
    leader = cluster.leader()
    assert leader is not None and leader.core is not None
    victim = next(i for i in IDS if i != leader.id)
    rest = [[i, peer_url(i)] for i in IDS if i != victim]
    rid = make_request_id(cluster.now_ms // 1000, b"\x01\x02\x03", 1, 1)
    assert isinstance(leader.core.propose_config(rid, rest, cluster.now_ms), ConfigAccepted)
    cluster.drain(leader)
    node = cluster.nodes[victim]
    term = leader.core.term
    for _ in range(1000):  # 10 s
        run(1)
        assert node.core is not None
        if node.core.removed and not removed_events:
            removed_events.append(victim)
        assert node.core.term == term, f"{victim} campaigned\n" + cluster.trace.render()
    assert removed_events == [victim]
    assert node.core is not None and node.core.role is Role.CLIENT
    assert cluster.counters[RemovedFromCluster.__name__] == 1
    # told, so the leader no longer keeps a connection for it
    assert sorted(p.id for p in leader.core.connect_to()) == sorted(set(IDS) - {victim})
    assert leader.core.is_leader and leader.core.term == term
