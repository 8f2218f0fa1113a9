"""The commit lane (issue #28) in the simulator: with stop-and-wait replication (the
reference-compatible default) the commit-only AppendEntries does not hold back the next entry,
is never retransmitted, and the invariants hold throughout (the random runs of
``test_sim_random`` exercise it under loss, duplication and reordering too). And the send
order a reference follower needs from a stop-and-wait leader (``ReferenceFollowerOrder``),
checked over random stop-and-wait runs, with a negative control: a commit-only message that
starts below what was already sent is caught."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from raftlog.consensus import replication
from raftlog.consensus.state import CoreState
from raftlog.rpc.messages import AppendEntries, AppendEntriesResponse
from sim.cluster import SimCluster
from sim.scenario import random_params, run_simulation
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


class ReferenceFollowerOrder:
    """The send-order rule a reference follower needs from a leader (it truncates its log
    after ``prevLogIndex`` on every AppendEntries it processes, and recognises only a
    retransmission under the same msgid as a duplicate): within one term, a *new*
    AppendEntries to a follower never starts below what an earlier one already covered,
    unless the follower rejected one since (the leader then probes back). A rejection (any
    answer ``success = false`` to an AppendEntries of that term) lets the next new request
    start anywhere. Recorded where the core decides (``CoreState.send``, in the order it
    steps answers and ticks, before the executor sends a pass's messages together); the
    network may reorder, but the rule is about the leader's send order, which a FIFO link
    (ZeroMQ over TCP) preserves."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.violations: list[str] = []
        self.sent_new = 0
        self._covered: dict[tuple[int, int, str], int] = {}
        self._seen: dict[int, object] = {}
        """Every request and leader state checked, by id, kept alive so that no id is
        reused for a new one."""
        self._rejected: set[tuple[int, int, str]] = set()
        real_send, real_deliver = CoreState.send, SimCluster.deliver

        def send(state: CoreState, to: str, message: Any) -> None:
            if isinstance(message, AppendEntries):
                self._seen[id(state)] = state
                self._check(state, to, message)
            real_send(state, to, message)

        def deliver(cluster: SimCluster, src: str, dst: str, payload: Any) -> None:
            kind, incarnation, msgid, message = payload
            node = cluster.nodes[dst]
            sent = node.pending.get(msgid)
            if (
                kind == "resp"
                and isinstance(message, AppendEntriesResponse)
                and not message.success
                and sent is not None
                and isinstance(sent[1], AppendEntries)
                and incarnation == node.incarnation
                and node.core is not None
            ):
                self._rejected.add((id(node.core._s), sent[1].term, src))
            real_deliver(cluster, src, dst, payload)

        monkeypatch.setattr(CoreState, "send", send)
        monkeypatch.setattr(SimCluster, "deliver", deliver)

    def reset(self) -> None:
        """A new simulation: its peers start again at term 1 with the same names."""
        self._covered.clear()
        self._seen.clear()
        self._rejected.clear()

    def _check(self, state: CoreState, to: str, message: AppendEntries) -> None:
        if id(message) in self._seen:  # a retransmission: the same msgid, debounced
            return
        self._seen[id(message)] = message
        self.sent_new += 1
        progress = state.progress.get(to)
        if progress is not None and not progress.pipelines and len(progress.inflight) > 1:
            self.violations.append(
                f"{state.id} -> {to} term {message.term}: a new AppendEntries with"
                f" {len(progress.inflight) - 1} more in flight to an unmarked follower"
            )
        key = (id(state), message.term, to)
        end = message.prev_log_index + len(message.entries)
        covered = self._covered.get(key)
        if key in self._rejected or covered is None:  # stepped back after a rejection
            self._rejected.discard(key)
            self._covered[key] = end
            return
        if message.prev_log_index < covered:
            self.violations.append(
                f"{state.id} -> {to} term {message.term}: a new AppendEntries at"
                f" prevLogIndex {message.prev_log_index}, below {covered} already sent"
            )
        self._covered[key] = max(covered, end)


def _random_runs(
    seeds: range, order: ReferenceFollowerOrder, *, inflight: int | None = 1
) -> None:
    """Random runs; ``inflight`` None keeps each seed's own pipeline setting (1, 4 or 16)."""
    for seed in seeds:
        order.reset()
        params = random_params(seed, 1500)
        if inflight is not None:
            params = replace(params, max_inflight_messages=inflight)
        run_simulation(params)


def test_stop_and_wait_send_order_is_safe_for_reference_followers(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    order = ReferenceFollowerOrder(monkeypatch)
    _random_runs(range(12), order)
    assert order.sent_new > 1000  # the rule was exercised
    assert not order.violations, order.violations[:5]


def _pipelined_runs(monkeypatch: pytest.MonkeyPatch) -> ReferenceFollowerOrder:
    """The send order over 12 random runs with 16 requests in flight, followers swapping
    kind (losing and regaining the mark) among the chaos actions."""
    order = ReferenceFollowerOrder(monkeypatch)
    _random_runs(range(12), order, inflight=16)
    return order


def test_pipelined_send_order_is_the_same_rule(monkeypatch: pytest.MonkeyPatch) -> None:
    """Pipelining changes how many requests are in flight, never the order: a timeout
    resends the newest one identically instead of starting a new pipeline at the oldest
    (``replication`` module docstring), so the rule holds for every follower. And a
    follower whose latest answer lost its mark (the chaos action ``swap_kind``) never has
    more than one request in flight that was sent after that answer."""
    order = _pipelined_runs(monkeypatch)
    assert order.sent_new > 1000
    assert not order.violations, order.violations[:5]


def test_the_check_catches_a_leader_that_pipelines_to_an_unmarked_follower(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Negative control: a window that ignores the mark (pipelining to every follower, as
    ``replication_pipeline`` did before the mark) is caught in the same runs."""
    monkeypatch.setattr(
        replication,
        "window",
        lambda s, pr: s.cfg.max_inflight_messages
        if pr.state is replication.ProgressState.REPLICATE else 1,
    )
    violations = _pipelined_runs(monkeypatch).violations
    assert any("unmarked follower" in v for v in violations), violations[:3]


def test_the_check_catches_a_timeout_that_restarts_the_pipeline_at_the_oldest(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Negative control: the pipelined timeout as it was before 2026-11-27 (abandon, probe
    again from the oldest request's prevLogIndex with a new request) is caught."""
    real_on_timeout = replication._on_timeout

    def restart_at_the_oldest(s: Any, pr: Any) -> None:
        oldest = pr.inflight[0].request
        if replication.window(s, pr) == 1 or not isinstance(oldest, AppendEntries):
            real_on_timeout(s, pr)
            return
        pr.become_probe(oldest.prev_log_index + 1, one_entry=False)
        replication.pump(s, pr)

    monkeypatch.setattr(replication, "_on_timeout", restart_at_the_oldest)
    violations = _pipelined_runs(monkeypatch).violations
    assert any("below" in v for v in violations), violations[:3]


def test_send_order_check_catches_a_commit_lane_behind_what_was_sent(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Negative control: a commit-only message that starts one entry too low (as one sent
    while an append is in flight, or retransmitted after it, would) is caught."""
    real_send_commit = replication.send_commit

    def one_too_low(s: Any, pr: Any) -> None:
        pr.next -= 1
        try:
            if pr.next - 1 >= max(s.log.snapshot_index, 0):
                real_send_commit(s, pr)
        finally:
            pr.next += 1

    monkeypatch.setattr(replication, "send_commit", one_too_low)
    order = ReferenceFollowerOrder(monkeypatch)
    _random_runs(range(3), order)
    assert order.violations
