"""Negative controls: deliberately broken cores must make the invariant checker fail.

Each classic mistake (``raftlog.consensus.Bug``) gets a scripted interleaving that turns it into
a visible violation; the same script must run clean on the correct core, so the failure is the
bug's doing and not the script's. A bug that the random simulation exposes on its own is
also hunted with a bounded seed budget, proving the random runs can fail too. (A second one,
a follower committing past what an AppendEntries verified, was hunted that way until
2026-11-27: the random runs found it through heartbeats a pipelining leader sent while
probing. Its leader no longer sends any AppendEntries that would expose it -- 300 seeds
found nothing -- so only its scripted scenario, with an injected heartbeat, remains.)
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import pytest

from raftlog.consensus import Bug
from raftlog.rpc.messages import AppendEntries
from sim.invariants import InvariantError
from sim.scenario import SimParams, SimulationError, run_simulation
from sim.script import Script


def double_vote_after_restart(s: Script) -> None:
    """Two candidates of term 1; the voter votes for one, restarts, is asked by the other."""
    s.partition({"n0"}, {"n1"}, {"n2"})
    s.campaign("n0")
    s.campaign("n1")
    s.partition({"n0", "n2"}, {"n1"})
    assert s.until(lambda: s.leads("n0"), 30)
    s.crash("n2")
    s.restart("n2")
    s.partition({"n1", "n2"}, {"n0"})
    s.step(30)


def vote_lost_with_a_slow_disk(s: Script) -> None:
    """As above, but the voter crashes while its vote is still being written."""
    s.partition({"n0"}, {"n1"}, {"n2"})
    s.campaign("n0")
    s.campaign("n1")
    s.node("n2").persist_delay = 6
    s.partition({"n0", "n2"}, {"n1"})
    assert s.until(lambda: s.leads("n0"), 30)
    s.crash("n2")
    s.node("n2").persist_delay = None
    s.restart("n2")
    s.partition({"n1", "n2"}, {"n0"})
    s.step(30)


def leader_loses_its_unpersisted_entry(s: Script) -> None:
    """The leader's disk is slow; one follower acks; the leader crashes before its write."""
    s.campaign("n0")
    assert s.until(lambda: s.leads("n0"), 10)
    s.step(5)
    s.cut("n0", "n2")
    s.node("n0").persist_delay = 10
    index = s.propose("n0", b"e")
    s.until(lambda: s.core("n0").commit_index >= index, 6)
    s.crash("n0")
    s.node("n0").persist_delay = None
    s.restart("n0")
    s.partition({"n0", "n2"}, {"n1"})
    s.campaign("n2")
    s.step(20)


def follower_with_a_stale_tail(s: Script) -> None:
    """A deposed leader keeps an uncommitted entry after a committed one; a heartbeat that
    verifies only the committed one carries a higher commit index. A raftlog leader sent
    such heartbeats while probing before its window became per follower (2026-11-27); it no
    longer does (its heartbeats start at the end of what it sent, and an unanswered follower
    gets none while a probe is out), so the heartbeat is injected, as another leader
    implementation would send it."""
    s.campaign("n0")
    assert s.until(lambda: s.leads("n0"), 10)
    s.propose("n0", b"x")
    assert s.until(lambda: all(s.core(p).commit_index == 1 for p in ("n0", "n1", "n2")), 20)
    s.partition({"n0"}, {"n1", "n2"})
    s.propose("n0", b"stale")
    s.campaign("n1")
    assert s.until(lambda: s.leads("n1"), 10)
    s.propose("n1", b"a")
    s.propose("n1", b"b")
    assert s.until(lambda: s.core("n1").commit_index >= 3, 10)
    leader = s.core("n1")
    s.inject("n1", "n0", AppendEntries("n1", leader.term, 1, 1, leader.commit_index, ()))
    s.step(2)
    s.heal()
    s.step(40)


def figure_8(s: Script) -> None:
    """Raft paper Figure 8 with five peers; (c) is where the broken leader commits."""
    s.campaign("n0")  # (a) n0 leads term 1, X reaches n1 only
    assert s.until(lambda: s.leads("n0"), 10)
    s.step(3)
    s.partition({"n0", "n1"}, {"n2", "n3", "n4"})
    x = s.propose("n0", b"X")
    s.step(3)
    s.crash("n0")  # (b) n4 leads term 2 and appends Y where nobody sees it
    s.campaign("n4")
    assert s.until(lambda: s.leads("n4"), 10)
    s.partition({"n0", "n1", "n2"}, {"n3"}, {"n4"})
    s.propose("n4", b"Y")
    s.restart("n0")  # (c) n0 leads term 3 (n2 refused term 2: it voted for n4)
    s.campaign("n0")
    s.step(3)
    s.campaign("n0")
    assert s.until(lambda: s.leads("n0"), 10)
    assert s.until(lambda: s.node("n2").log.last_index >= x, 20)
    s.cut("n0", "n2")  # n2 holds X but will not get the term-3 checkpoint
    s.step(2)
    s.crash("n0")  # (d) n4 leads term 4 with n2 and n3, and overwrites X
    s.partition({"n2", "n3", "n4"}, {"n1"}, {"n0"})
    assert s.until(lambda: not s.leads("n4"), 20)  # n2 answers with term 3
    s.campaign("n4")
    s.step(20)


SCENARIOS: list[tuple[Callable[[Script], None], int, Bug, str]] = [
    (double_vote_after_restart, 3, Bug.VOTE_NOT_PERSISTED, "election safety"),
    (vote_lost_with_a_slow_disk, 3, Bug.REPLY_BEFORE_PERSIST, "election safety"),
    (leader_loses_its_unpersisted_entry, 3, Bug.LEADER_ACK_BEFORE_PERSIST, "leader completeness"),
    (follower_with_a_stale_tail, 3, Bug.FOLLOWER_COMMIT_TO_LAST_INDEX, "committed entry"),
    (figure_8, 5, Bug.COMMIT_PREVIOUS_TERM_BY_COUNT, "leader completeness"),
]


@pytest.mark.parametrize(
    ("scenario", "members", "bug", "violation"), SCENARIOS, ids=[b.value for *_, b, _ in SCENARIOS]
)
def test_checker_catches_the_broken_core(
    scenario: Callable[[Script], None], members: int, bug: Bug, violation: str
) -> None:
    script = Script(members, frozenset({bug}))
    with pytest.raises(InvariantError, match=violation):
        scenario(script)


@pytest.mark.parametrize(
    ("scenario", "members", "bug", "violation"), SCENARIOS, ids=[b.value for *_, b, _ in SCENARIOS]
)
def test_same_scenario_is_clean_with_the_correct_core(
    scenario: Callable[[Script], None], members: int, bug: Bug, violation: str
) -> None:
    scenario(Script(members))


def _hunt(bug: Bug, seeds: int, **changes: object) -> list[int]:
    failing = []
    for seed in range(seeds):
        params = replace(SimParams(seed=seed, steps=2000), bugs=frozenset({bug}), **changes)
        try:
            run_simulation(params)
        except SimulationError:
            failing.append(seed)
    return failing


def test_random_simulation_catches_replies_sent_before_persist() -> None:
    failing = _hunt(
        Bug.REPLY_BEFORE_PERSIST,
        40,
        membership=False,
        compaction=False,
        chaos_rate=0.05,
        crash_in_ready=0.01,
        restart_after=(1, 30),
        max_persist_delay=4,
        actions=("crash", "crash_leader", "partition", "isolate_leader"),
    )
    assert failing
