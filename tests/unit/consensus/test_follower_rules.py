"""One test per follower rule (docs/protocol.md §8 receiver side; Raft §5.3)."""

from __future__ import annotations

from consensus_helpers import config, entry, make_node, replies

from raftlog.consensus import Role, TruncationRefused
from raftlog.rpc.messages import AppendEntries, AppendEntriesResponse


def _reply(ready) -> AppendEntriesResponse:  # type: ignore[no-untyped-def]
    (sent,) = replies(ready)
    assert isinstance(sent.message, AppendEntriesResponse)
    return sent.message


def test_follower_rejects_append_with_stale_term() -> None:
    node = make_node(term=5)
    ready = node.receive(AppendEntries("n2", 4, 0, 0, 0, (entry(4),)))
    assert _reply(ready) == AppendEntriesResponse(5, False)
    assert node.core.last_index == 0


def test_follower_adopts_a_higher_term_and_follows_the_leader() -> None:
    node = make_node(term=2, voted_for="n3")
    node.receive(AppendEntries("n2", 4, 0, 0, 0))
    state = node.hard_state.load()
    assert (state.current_term, state.voted_for) == (4, None)
    assert node.core.leader_id == "n2" and node.core.role is Role.FOLLOWER


def test_follower_rejects_missing_prev_entry_with_next_index_hint() -> None:
    node = make_node(entries=(entry(1), entry(1)), term=1)
    ready = node.receive(AppendEntries("n2", 1, 5, 1, 0))
    assert _reply(ready) == AppendEntriesResponse(1, False, 3)


def test_follower_sends_no_hint_when_its_log_is_long_enough() -> None:
    node = make_node(entries=(entry(1), entry(1), entry(1)), term=2)
    ready = node.receive(AppendEntries("n2", 2, 2, 2, 0))
    assert _reply(ready) == AppendEntriesResponse(2, False, None)
    assert node.core.last_index == 3  # a failed match never truncates


def test_follower_acknowledges_only_after_the_entries_are_persisted() -> None:
    node = make_node(term=1)
    node.core.step_request("tok", AppendEntries("n2", 1, 0, 0, 0, (entry(1), entry(1))))
    ready = node.core.ready()
    assert ready.append is not None and len(ready.append.entries) == 2
    assert not ready.messages_now
    assert ready.messages_after_persist[0].message == AppendEntriesResponse(1, True, pipelines=True)


def test_follower_never_truncates_on_a_matching_prefix_or_a_heartbeat() -> None:
    entries = (entry(1), entry(1), entry(1))
    node = make_node(entries=entries, term=1)
    stale = node.receive(AppendEntries("n2", 1, 0, 0, 0, entries[:1]))
    heartbeat = node.receive(AppendEntries("n2", 1, 1, 1, 0))
    assert _reply(stale).success and _reply(heartbeat).success
    assert stale.append is None and heartbeat.append is None
    assert node.core.last_index == 3


def test_follower_truncates_at_the_first_conflict_and_appends() -> None:
    entries = (entry(1), entry(1), entry(1))
    node = make_node(entries=entries, term=2)
    new = entry(2)
    ready = node.receive(AppendEntries("n2", 2, 0, 0, 0, (entries[0], new)))
    assert _reply(ready).success
    assert ready.append is not None and ready.append.first_index == 2
    assert ready.append.entries == (new,)
    assert node.log.last_index == 2 and node.log.term_at(2) == 2


def test_follower_refuses_truncation_at_or_below_its_commit_index() -> None:
    entries = (entry(1), entry(1), entry(1))
    node = make_node(entries=entries, term=2, applied=2)
    ready = node.receive(AppendEntries("n2", 2, 1, 1, 0, (entry(2),)))
    assert _reply(ready) == AppendEntriesResponse(2, False)
    assert TruncationRefused("n2", 2, 2, 2) in ready.events
    assert node.log.last_index == 3 and ready.append is None


def test_follower_commit_stops_at_the_last_entry_this_request_verified() -> None:
    stale_tail = (entry(1), entry(1), entry(1), entry(1))
    node = make_node(entries=stale_tail, term=2)
    node.receive(AppendEntries("n2", 2, 1, 1, 10))  # verifies index 1 only
    assert node.core.commit_index == 1
    node.receive(AppendEntries("n2", 2, 2, 1, 10))
    assert node.core.commit_index == 2


def test_follower_applies_committed_entries_in_order_once() -> None:
    node = make_node(term=1)
    batch = (entry(1), entry(1), entry(1))
    node.receive(AppendEntries("n2", 1, 0, 0, 2, batch))
    node.receive(AppendEntries("n2", 1, 3, 1, 3))
    node.receive(AppendEntries("n2", 1, 3, 1, 3))
    assert [index for index, _ in node.applied] == [1, 2, 3]


def test_append_from_a_leader_outside_the_configuration_is_processed() -> None:
    node = make_node(members=config("n1", "n2", "n3"), term=1)
    ready = node.receive(AppendEntries("n7", 2, 0, 0, 0, (entry(2),)))
    assert _reply(ready) == AppendEntriesResponse(2, True, pipelines=True)
    assert node.core.leader_id == "n7"


def test_prev_index_below_the_snapshot_is_not_a_conflict() -> None:
    entries = (entry(1),) * 4
    node = make_node(entries=entries, term=1, applied=4, snapshot=(3, 1, b"state"))
    carried = (entry(1), entry(1), entries[3], entry(1))  # indexes 2..5
    ready = node.receive(AppendEntries("n2", 1, 1, 1, 5, carried))
    assert _reply(ready).success
    assert node.core.last_index == 5 and node.core.commit_index == 5
