"""The invariant checker itself: it must not report violations a correct core cannot make."""

from __future__ import annotations

from sim.script import Script


def test_entries_committed_in_the_step_a_peer_crashes_in_are_still_recorded() -> None:
    """A sole member commits and applies within one step (its own fsync is the quorum) and
    crashes before the checker runs; after the restart its applied index is beyond anything
    the checker saw committed, and the checker must take those entries from its log."""
    s = Script(1)
    assert s.leads("n0")
    first = s.propose("n0", b"a")  # appended, persisted, committed and applied at once
    assert s.node("n0").sm.index == first
    s.crash("n0")
    s.restart("n0")
    s.step()
    second = s.propose("n0", b"b")
    s.step(3)
    assert s.node("n0").sm.index == second
    assert s.invariants.canon[first].data == b"a"
