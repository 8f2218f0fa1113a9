"""The Ready/advance contract the driver relies on."""

from __future__ import annotations

import pytest
from consensus_helpers import NOW_MS, config, elect, entry, make_node, rid

from raftlog.consensus import CoreConfig
from raftlog.errors import LocalProtocolError
from raftlog.rpc.messages import AppendEntries, RequestVote


def test_ready_cannot_be_taken_twice_without_advance() -> None:
    node = make_node()
    node.core.step_request("t", RequestVote("n2", 1, 0, 0))
    ready = node.core.ready()
    assert not node.core.has_ready()
    with pytest.raises(LocalProtocolError):
        node.core.ready()
    node.core.advance(ready)


def test_advance_needs_the_ready_handed_out_last() -> None:
    node = make_node()
    node.core.step_request("t", RequestVote("n2", 1, 0, 0))
    ready = node.core.ready()
    node.core.advance(ready)
    with pytest.raises(LocalProtocolError):
        node.core.advance(ready)


def test_inputs_between_ready_and_advance_go_into_the_next_ready() -> None:
    node = make_node()
    node.core.step_request("first", RequestVote("n2", 1, 0, 0))
    ready = node.core.ready()
    node.core.step_request("second", RequestVote("n2", 1, 0, 0))
    node.executor.execute(ready)  # persist, send, apply, advance
    assert node.core.has_ready()
    later = node.core.ready()
    assert [m.token for m in later.messages_after_persist] == ["second"]
    node.core.advance(later)


def test_committed_entries_are_handed_out_once_and_in_bounded_batches() -> None:
    node = make_node(term=1, max_committed_bytes_per_ready=64)
    batch = tuple(entry(1) for _ in range(10))
    node.receive(AppendEntries("n2", 1, 0, 0, 10, batch))
    committed = [r.committed for r in node.readies if r.committed is not None]
    assert len(committed) > 1
    indexes = [c.first_index + i for c in committed for i in range(len(c.entries))]
    assert indexes == list(range(1, 11))


def test_from_millis_rounds_every_duration_up_to_ticks() -> None:
    settings = CoreConfig.from_millis("n1", tick_ms=30, election_timeout_min=200)
    assert settings.election_ticks == (7, 10)
    assert settings.heartbeat_ticks == 3 and settings.vote_timeout_ticks == 2


def test_soft_state_reports_every_role_change() -> None:
    node = make_node()
    ready = elect(node)
    assert ready.soft_state is not None and ready.soft_state.leader_id == "n1"
    node.core.propose(rid(), b"x", NOW_MS)
    assert node.run().soft_state is None


def test_writes_must_be_reported_durable_in_the_order_they_were_dispatched() -> None:
    """A storage layer that completed a later write before an earlier one (two threads, a
    reordering queue) would let the core count entries whose predecessors are not on disk."""
    node = make_node(term=1, members=config("n1"))
    assert node.core.is_leader  # a sole member leads at once
    base = node.core.commit_index
    node.core.propose(rid(), b"x", NOW_MS)
    first = node.core.ready()
    node.core.dispatched(first)
    node.core.propose(rid(), b"y", NOW_MS)
    second = node.core.ready()
    node.core.dispatched(second)
    assert first.needs_persist and second.needs_persist
    with pytest.raises(LocalProtocolError):
        node.core.persisted(second)
    assert node.core.commit_index == base  # nothing counted before its write is durable
    for ready in (first, second):
        assert ready.append is not None
        node.log.append(ready.append.first_index, ready.append.entries)
        node.core.persisted(ready)
    assert node.core.commit_index == node.core.last_index == base + 2
