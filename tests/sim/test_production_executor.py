"""The simulator drives the production ``ReadyExecutor`` and its ``DurableWrites`` contract:
an ordering bug planted in the executor or in the storage seam (not in a copy of them) is
caught by the invariant checker; the same scenario is clean without it."""

from __future__ import annotations

from dataclasses import replace

import pytest

from raftlog.consensus import Ready
from raftlog.server.ready_executor import ReadyExecutor
from sim.cluster import SimWrites
from sim.invariants import InvariantError
from sim.scenario import SimParams, SimulationError, run_simulation
from sim.script import Script
from sim.test_negative_controls import (
    leader_loses_its_unpersisted_entry,
    vote_lost_with_a_slow_disk,
)


def test_votes_sent_before_the_executor_persists_break_election_safety(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    real_execute = ReadyExecutor.execute

    def promise_before_persisting(self: ReadyExecutor, ready: Ready) -> bool:
        # the planted bug: what promises durability leaves with messages_now, before the
        # (slow) write completes; sent again after it, which the network could do anyway
        self._send(ready.messages_after_persist)
        return real_execute(self, ready)

    monkeypatch.setattr(ReadyExecutor, "execute", promise_before_persisting)
    with pytest.raises(InvariantError, match="election safety"):
        vote_lost_with_a_slow_disk(Script(3))


def test_the_same_scenario_is_clean_with_the_production_executor() -> None:
    vote_lost_with_a_slow_disk(Script(3))


def test_a_disk_that_reports_writes_done_before_they_are_loses_a_committed_entry(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The planted bug is in the storage seam: completion is reported as soon as a write is
    submitted (as a storage thread that signalled before its fsync would). The leader then
    counts its own copy, commits with one follower, crashes before the write happens, and a
    new leader is elected without the entry."""

    def reports_at_once(self: SimWrites) -> int:
        return self.submitted

    monkeypatch.setattr(SimWrites, "durable", reports_at_once)
    with pytest.raises(InvariantError, match="leader completeness"):
        leader_loses_its_unpersisted_entry(Script(3))


def test_the_leader_scenario_is_clean_with_the_production_writes() -> None:
    leader_loses_its_unpersisted_entry(Script(3))


def test_pipelined_writes_under_random_faults_are_caught_when_replies_skip_the_wait(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With writes in flight across Readies (random delays), replies that do not wait for
    the write before them are caught by the random simulation too, not only by a script."""
    real_execute = ReadyExecutor.execute

    def promise_before_persisting(self: ReadyExecutor, ready: Ready) -> bool:
        self._send(ready.messages_after_persist)
        return real_execute(self, ready)

    monkeypatch.setattr(ReadyExecutor, "execute", promise_before_persisting)
    failing = []
    for seed in range(40):
        params = replace(
            SimParams(seed=seed, steps=2000),
            membership=False,
            compaction=False,
            chaos_rate=0.05,
            crash_in_ready=0.01,
            restart_after=(1, 30),
            max_persist_delay=4,
            actions=("crash", "crash_leader", "partition", "isolate_leader"),
        )
        try:
            run_simulation(params)
        except SimulationError:
            failing.append(seed)
    assert failing
