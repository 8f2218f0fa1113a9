"""The commit lane (issue #28) in the simulator: with stop-and-wait replication (the
reference-compatible default) the commit-only AppendEntries does not hold back the next entry,
is never retransmitted, and the invariants hold throughout (the random runs of
``test_sim_random`` exercise it under loss, duplication and reordering too)."""

from __future__ import annotations

from typing import Any

from raftlog.rpc.messages import AppendEntries
from sim.script import Script


def _appends(sent: list[tuple[str, str, Any]], dst: str) -> list[AppendEntries]:
    return [
        p[3] for src, d, p in sent
        if src == "n0" and d == dst and p[0] == "req" and isinstance(p[3], AppendEntries)
    ]


def test_next_entry_leaves_while_the_commit_only_append_is_unanswered() -> None:
    script = Script(3, inflight=1)
    sent: list[tuple[str, str, Any]] = []
    network = script.cluster.network
    real_send = network.send

    def recording(now: int, src: str, dst: str, payload: object) -> None:
        sent.append((src, dst, payload))
        real_send(now, src, dst, payload)

    network.send = recording  # type: ignore[method-assign]
    script.campaign("n0")
    assert script.until(lambda: script.leads("n0"), 20)
    sent.clear()
    first = script.propose("n0", b"a")
    leader = script.core("n0")
    assert script.until(lambda: leader.commit_index >= first, 20)  # and the lane leaves
    lane = [m for m in _appends(sent, "n1") if not m.entries and m.commit_index >= first]
    assert lane, "no commit-only AppendEntries was sent"
    sent.clear()
    second = script.propose("n0", b"b")  # before the lane's answer is back
    appends = [m for m in _appends(sent, "n1") if m.entries]
    assert len(appends) == 1, "the next entry waited for the commit-only answer"
    append = appends[0]
    assert append.prev_log_index + len(append.entries) == second
    assert script.until(lambda: all(
        script.core(p).commit_index >= second for p in ("n0", "n1", "n2")
    ), 20)
    script.step(60)  # timeouts and heartbeats: the lane's message is never sent again
    assert all(m is not lane[0] for m in _appends(sent, "n1"))
