"""The simulator drives the production ``ReadyExecutor``: an ordering bug planted in it (not
in a copy of it) is caught by the invariant checker; the same scenario is clean without it."""

from __future__ import annotations

import pytest

from raftlog.consensus import Ready
from raftlog.server.ready_executor import ReadyExecutor
from sim.invariants import InvariantError
from sim.script import Script
from sim.test_negative_controls import vote_lost_with_a_slow_disk


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
