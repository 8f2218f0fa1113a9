"""A paused leader, once resumed, follows the new leader: one election per pause, not two
(issue #12).

The leader is stopped (SIGSTOP) for longer than the election timeout; the others elect a new
leader and go on. On SIGCONT the peer's loop first reads what queued up in its sockets -- the
new leader's AppendEntries, which make it a follower -- and then ticks for the whole time it
was stopped. Ticking that span one tick at a time ran its freshly reset election timer out at
once: it campaigned with term + 1, the new leader (a leader is never "sticky") adopted the
term and stepped down, and a second election followed every pause. ``RaftCore.tick(count)``
counts inputs read before a span as observed at its end. ``SimCluster.resume`` drives the
core exactly as ``PeerNode.run`` does -- both run ``loop_step`` (drain, one ``tick(span)``,
Readies).
"""

from __future__ import annotations

from random import Random

import pytest

from raftlog.consensus import CoreConfig, Role
from raftlog.consensus.results import Appended
from raftlog.ids import make_request_id
from sim.cluster import SimCluster
from sim.invariants import Invariants
from sim.network import LinkRule
from sim.tracing import Trace

IDS = ["n0", "n1", "n2"]


@pytest.mark.parametrize("seed", range(8))
def test_a_resumed_leader_follows_the_new_leader(seed: int) -> None:
    rng = Random(seed)
    cluster = SimCluster(IDS, IDS, Random(seed), LinkRule(delay=(1, 2)), Trace(), CoreConfig)
    invariants = Invariants(cluster, full_check_every=25)
    cluster.start_all()
    writes = 0

    def run(ticks: int, write: bool = True) -> None:
        nonlocal writes
        for n in range(ticks):
            cluster.step()
            invariants.check(cluster.tick)
            leader = cluster.leader()
            if write and n % 5 == 0 and leader is not None and leader.core is not None:
                writes += 1
                rid = make_request_id(cluster.now_ms // 1000, b"\x0a\x0b\x0c", 1, writes)
                if isinstance(leader.core.propose(rid, b"w", cluster.now_ms), Appended):
                    cluster.drain(leader)

    run(200)
    for _ in range(3):  # three pauses per seed, each until a new leader took over + 0-1 s
        old = cluster.leader()
        assert old is not None
        cluster.pause(old.id)
        for _ in range(500):  # until the others elect a leader, then a while longer
            run(1)
            if cluster.leader() is not old:
                break
        run(rng.randint(0, 100))
        new = cluster.leader()
        assert new is not None and new is not old and new.core is not None
        term = new.core.term
        cluster.resume(old.id)
        run(300)
        assert cluster.leader() is new and new.core.term == term, (
            f"seed {seed}: the resumed {old.id} deposed {new.id}\n" + cluster.trace.render()
        )
        assert old.core is not None and old.core.role is Role.FOLLOWER
        assert old.core.leader_id == new.id and old.core.term == term
        run(20, write=False)  # let the last commit index reach it
        assert old.core.commit_index == new.core.commit_index  # it caught up
