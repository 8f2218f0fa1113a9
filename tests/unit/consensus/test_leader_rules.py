"""One test per leader rule (docs/protocol.md §8 leader side, §12.2; Raft §5.3, §5.4.2)."""

from __future__ import annotations

from consensus_helpers import (
    NOW_MS,
    ack,
    config,
    config_entry,
    elect,
    entry,
    make_node,
    requests,
    rid,
)

from raftlog.consensus import Appended, FollowerLostEntries, Role, SteppedDown
from raftlog.entry import EntryType
from raftlog.rpc.messages import AppendEntries, AppendEntriesResponse


def _aes(ready, to=None):  # type: ignore[no-untyped-def]
    return [m for m in requests(ready, AppendEntries) if to is None or m.to == to]


def _settle(node, ready, **answers) -> None:  # type: ignore[no-untyped-def]
    """Acknowledge every AppendEntries in ``ready`` (and in what the answers trigger);
    ``answers`` as for ``ack`` (e.g. ``marked=False``)."""
    pending = _aes(ready)
    while pending:
        pending = _aes(ack(node, pending.pop(0), **answers)) + pending


def test_new_leader_starts_every_follower_at_its_last_index_plus_one() -> None:
    node = make_node(entries=(entry(1), entry(1)), term=1, applied=2)
    ready = elect(node)
    probes = _aes(ready)
    assert sorted(m.to for m in probes) == ["n2", "n3"]
    assert all(m.message.prev_log_index == 2 and m.message.prev_log_term == 1 for m in probes)
    assert all(m.message.entries == () for m in probes)  # everything committed: no checkpoint


def test_new_leader_appends_checkpoint_when_last_entry_is_from_an_older_term() -> None:
    node = make_node(entries=(entry(1), entry(1)), term=1)
    ready = elect(node)
    assert node.core.last_index == 3
    checkpoint = node.core.entries(3, 4)[0]
    assert checkpoint.entry_type == EntryType.CHECKPOINT and checkpoint.term == 2
    assert _aes(ready)[0].message.prev_log_index == 2  # the probe carries the checkpoint


def test_leader_never_commits_a_previous_term_entry_by_counting_replicas() -> None:
    node = make_node(entries=(entry(1), entry(1)), term=1)
    ready = elect(node)
    old = AppendEntries("n1", 2, 0, 0, 0, tuple(node.core.entries(1, 3)))
    node.answer("n2", old, AppendEntriesResponse(2, True))  # n2 holds 1..2 (term 1)
    assert node.core.commit_index == 0
    ack(node, _aes(ready, "n2")[0])  # n2 holds the term-2 checkpoint too
    assert node.core.commit_index == 3


def test_leader_sends_append_entries_before_its_own_persist() -> None:
    node = make_node()
    _settle(node, elect(node))
    result = node.core.propose(rid(), b"data", NOW_MS)
    assert isinstance(result, Appended)
    ready = node.core.ready()
    assert ready.append is not None and ready.append.entries[0].data == b"data"
    assert {m.to for m in _aes(ready)} == {"n2", "n3"}
    assert all(m in ready.messages_now for m in _aes(ready))
    node.executor.execute(ready)  # persist, send, apply, advance


def test_leader_counts_its_own_entry_only_after_persist() -> None:
    node = make_node()
    _settle(node, elect(node))
    commit = node.core.commit_index
    node.core.propose(rid(), b"data", NOW_MS)
    ready = node.core.ready()
    to_n2 = _aes(ready, "n2")[0]
    node.core.step_response("n2", to_n2.message, AppendEntriesResponse(node.core.term, True))
    assert node.core.commit_index == commit  # n2 alone is not a majority of three
    node.executor.execute(ready)  # persist, send, apply, advance
    assert node.core.commit_index == commit + 1


def test_pipeline_is_bounded_by_the_inflight_message_limit() -> None:
    node = make_node(max_append_bytes=64, max_inflight_messages=2)
    _settle(node, elect(node))
    for n in range(12):
        node.core.propose(rid(), bytes([n]), NOW_MS)
    to_n2 = [m.message for m in _aes(node.run(), "n2")]
    assert len(to_n2) == 2
    assert to_n2[1].prev_log_index == to_n2[0].prev_log_index + len(to_n2[0].entries)
    assert all(sum(e.size for e in m.entries) <= 64 for m in to_n2)


def test_heartbeat_prev_index_is_the_last_index_already_sent() -> None:
    node = make_node(max_append_bytes=64, max_inflight_messages=2, heartbeat_ticks=3)
    _settle(node, elect(node))
    for n in range(4):
        node.core.propose(rid(), bytes([n]), NOW_MS)
    sent = [m.message for m in _aes(node.run(), "n2")]
    last_sent = sent[-1].prev_log_index + len(sent[-1].entries)
    heartbeat = _aes(node.tick(3), "n2")[0].message
    assert heartbeat.entries == () and heartbeat.prev_log_index == last_sent


def test_rejection_backs_off_to_the_next_index_hint() -> None:
    node = make_node(entries=(entry(1),) * 6, term=1, applied=6)
    probe = _aes(elect(node), "n2")[0]
    retry = _aes(ack(node, probe, success=False, hint=3), "n2")[0].message
    assert retry.prev_log_index == 2 and len(retry.entries) == 1


def test_rejection_without_hint_backs_off_by_one_entry() -> None:
    node = make_node(entries=(entry(1),) * 6, term=1, applied=6)
    probe = _aes(elect(node), "n2")[0]
    retry = _aes(ack(node, probe, success=False), "n2")[0].message
    assert retry.prev_log_index == 5


def _two_in_flight(node, **answers):  # type: ignore[no-untyped-def]
    """Elect ``node`` (pipeline of 2, 64-byte appends), settle with ``answers`` (marked by
    default) and propose twelve entries: the AppendEntries that leave for n2."""
    _settle(node, elect(node), **answers)
    for n in range(12):
        node.core.propose(rid(), bytes([n]), NOW_MS)
    return _aes(node.run(), "n2")


def _end(send) -> int:  # type: ignore[no-untyped-def]
    return send.message.prev_log_index + len(send.message.entries)


def test_pipelined_timeout_resends_the_newest_identically_and_closes_the_window() -> None:
    """A reference follower that processed the later requests would exit on a new one with
    the oldest prevLogIndex; the newest one, resent under its msgid, is safe for either kind."""
    node = make_node(
        max_append_bytes=64,
        max_inflight_messages=2,
        append_entries_timeout_ticks=14,
        heartbeat_ticks=15,  # else a heartbeat (prevLogIndex: the end) is the newest
    )
    first, second = _two_in_flight(node)
    assert [m.message for m in _aes(node.tick(14), "n2")] == [second.message]  # same msgid
    assert node.core._s.progress["n2"].pipelines is False
    # a late rejection of the forgotten one changes nothing; a late success still counts
    assert not _aes(ack(node, first, success=False, hint=1))
    ack(node, first, marked=False)
    assert node.core._s.progress["n2"].match == _end(first)
    # the newest one's marked answer opens the window again: two new requests leave
    after = _aes(ack(node, second), "n2")
    assert len(after) == 2
    assert after[0].message.prev_log_index == _end(second)


def test_an_unmarked_follower_gets_stop_and_wait_whatever_the_pipeline_setting() -> None:
    """A reference follower never marks its answers: one request at a time, no heartbeat
    while it is outstanding, whatever ``max_inflight_messages`` says."""
    node = make_node(max_append_bytes=64, max_inflight_messages=4, heartbeat_ticks=3)
    (only,) = _two_in_flight(node, marked=False)
    assert _aes(node.tick(3), "n2") == []
    nxt = _aes(ack(node, only, marked=False), "n2")
    assert len(nxt) == 1
    assert nxt[0].message.prev_log_index == _end(only)


def test_an_unmarked_success_closes_the_window_until_everything_is_answered() -> None:
    """The peer behind the address is now a reference one: what is in flight stays, nothing
    new (not even a heartbeat) leaves before it is all answered, then stop-and-wait."""
    node = make_node(max_append_bytes=64, max_inflight_messages=2, heartbeat_ticks=3)
    first, second = _two_in_flight(node)
    assert _aes(ack(node, first, marked=False), "n2") == []
    assert _aes(node.tick(3), "n2") == []
    nxt = _aes(ack(node, second, marked=False), "n2")
    assert len(nxt) == 1
    assert nxt[0].message.prev_log_index == _end(second)


def test_a_timeout_after_the_window_closed_resends_only_the_newest() -> None:
    node = make_node(max_append_bytes=64, max_inflight_messages=2, append_entries_timeout_ticks=14)
    first, second = _two_in_flight(node)
    ack(node, first, marked=False)
    assert [m.message for m in _aes(node.tick(14), "n2")] == [second.message]
    assert len(node.core._s.progress["n2"].inflight) == 1


def test_stop_and_wait_timeout_resends_the_identical_request() -> None:
    """docs/protocol.md §6/§8: a reference follower debounces on the msgid and exits on a
    prevLogIndex below its commit index, so a retransmission must be the very same request."""
    node = make_node(append_entries_timeout_ticks=14)  # max_inflight_messages=1: the default
    _settle(node, elect(node))
    for n in range(3):
        node.core.propose(rid(), bytes([n]), NOW_MS)
    (first,) = _aes(node.run(), "n2")
    resent = _aes(node.tick(14 * 8 * 3), "n2")  # timeouts back off: 28, 56, 112, ... ticks
    assert len(resent) >= 3
    assert all(m.message is first.message for m in resent)


def test_stop_and_wait_sends_no_heartbeat_while_a_request_is_outstanding() -> None:
    """A reference follower truncates after prevLogIndex on every AppendEntries: a heartbeat
    racing an outstanding batch would cut it off again."""
    node = make_node(heartbeat_ticks=3, append_entries_timeout_ticks=14)
    _settle(node, elect(node))
    node.core.propose(rid(), b"x", NOW_MS)
    assert len(_aes(node.run(), "n2")) == 1
    for _ in range(4):
        assert _aes(node.tick(3), "n2") == []
    node.core.propose(rid(), b"y", NOW_MS)
    assert _aes(node.run(), "n2") == []  # waits for the answer, then sends everything pending


def test_late_success_from_an_abandoned_pipeline_still_counts() -> None:
    node = make_node(append_entries_timeout_ticks=14, max_inflight_messages=2)
    _settle(node, elect(node))
    node.core.propose(rid(), b"x", NOW_MS)
    original = _aes(node.run(), "n2")[0]
    node.tick(14)
    commit = node.core.commit_index
    ack(node, original)
    assert node.core.commit_index == commit + 1


def test_match_index_never_decreases() -> None:
    node = make_node()
    _settle(node, elect(node))
    progress = node.core._s.progress["n2"]
    high = progress.match
    stale = AppendEntries("n1", node.core.term, 0, 0, 0, ())
    node.answer("n2", stale, AppendEntriesResponse(node.core.term, True))
    assert progress.match == high


def test_leader_steps_down_on_a_higher_term_response() -> None:
    node = make_node()
    probe = _aes(elect(node), "n2")[0]
    ready = node.answer("n2", probe.message, AppendEntriesResponse(probe.message.term + 1, False))
    assert node.core.role is Role.FOLLOWER and node.core.term == probe.message.term + 1
    assert SteppedDown(probe.message.term, "higher_term") in ready.events
    assert ready.soft_state is not None and ready.soft_state.role is Role.FOLLOWER


def test_commit_advance_reaches_an_idle_follower_on_the_next_tick() -> None:
    """Issue #28: not in the pass that commits (the next append carries it; an immediate
    commit-only message doubled a lightly loaded cluster's peer messages), but within a
    tick when nothing else goes to that follower."""
    node = make_node()
    _settle(node, elect(node))
    node.core.propose(rid(), b"x", NOW_MS)
    to_n2 = _aes(node.run(), "n2")[0]
    assert _aes(ack(node, to_n2), "n2") == []  # committed; nothing more leaves in this pass
    update = _aes(node.tick(1), "n2")
    assert update and update[0].message.entries == ()
    assert update[0].message.commit_index == node.core.commit_index


def test_commit_advance_rides_on_the_next_append_when_one_leaves_first() -> None:
    node = make_node()
    _settle(node, elect(node))
    node.core.propose(rid(), b"x", NOW_MS)
    to_n2 = _aes(node.run(), "n2")[0]
    ack(node, to_n2)
    committed = node.core.commit_index
    node.core.propose(rid(), b"y", NOW_MS)
    (append,) = _aes(node.run(), "n2")
    assert [e.data for e in append.message.entries] == [b"y"]
    assert append.message.commit_index == committed
    assert _aes(node.tick(1), "n2") == []  # in flight: no commit-only message besides it


def test_check_quorum_steps_down_a_leader_that_hears_nobody() -> None:
    node = make_node(check_quorum=True, election_ticks=(20, 30))
    elect(node)
    ready = node.tick(40)
    assert node.core.role is Role.FOLLOWER
    assert any(isinstance(e, SteppedDown) and e.reason == "check_quorum" for e in ready.events)


def test_leader_replicates_to_a_joint_configuration_union() -> None:
    joint = config("n1", "n4", old=("n1", "n2", "n3"))
    node = make_node(entries=(config_entry(1, joint),), term=1, saved_config=joint, config_index=1)
    ready = elect(node, grant_from=("n2", "n4"))
    assert node.core.config.is_joint  # the joint entry is not known committed yet
    assert sorted({m.to for m in _aes(ready)}) == ["n2", "n3", "n4"]


def test_follower_that_lost_acknowledged_entries_is_probed_from_its_real_end() -> None:
    """A follower restarted on a wiped data directory rejects with a hint below what it had
    acknowledged; probing from ``match + 1`` would repeat the same rejection forever (the
    reference leader resends from the hint; so does this one), and the operator is told."""
    node = make_node(entries=(entry(1),) * 6, term=1, applied=6)
    _settle(node, elect(node))
    node.core.propose(rid(), b"after", NOW_MS)
    (sent,) = _aes(node.run(), "n2")
    assert sent.message.prev_log_index == 6  # n2 had acknowledged the whole log
    ready = ack(node, sent, success=False, hint=1)
    lost = [e for e in ready.events if isinstance(e, FollowerLostEntries)]
    assert lost == [FollowerLostEntries("n2", sent.message.prev_log_index, 0)]
    (retry,) = _aes(ready, "n2")
    assert retry.message.prev_log_index == 0 and len(retry.message.entries) == 1


def test_an_ordinary_rejection_is_not_reported_as_lost_entries() -> None:
    node = make_node(entries=(entry(1),) * 6, term=1, applied=6)
    probe = _aes(elect(node), "n2")[0]
    ready = ack(node, probe, success=False, hint=3)
    assert not [e for e in ready.events if isinstance(e, FollowerLostEntries)]


def test_commit_only_append_does_not_take_the_replication_slot() -> None:
    """Issue #28: the commit index goes to an idle follower on a lane of its own. Held in the
    stop-and-wait slot, it made the next entry wait for its answer -- read only after the
    leader's own fsync of that entry -- so the two fsyncs ran one after the other."""
    node = make_node()  # max_inflight_messages=1: the reference-compatible default
    _settle(node, elect(node))
    node.core.propose(rid(), b"x", NOW_MS)
    to_n2 = _aes(node.run(), "n2")[0]
    ack(node, to_n2)
    (commit_only,) = _aes(node.tick(1), "n2")  # the follower stayed idle for a tick
    assert commit_only.message.entries == ()
    node.core.propose(rid(), b"y", NOW_MS)
    (append,) = _aes(node.run(), "n2")  # at once: the commit-only answer is not awaited
    assert [e.data for e in append.message.entries] == [b"y"]
    assert append.message.prev_log_index == commit_only.message.prev_log_index
    # its late answer changes nothing; the append's answer commits the new entry
    ack(node, commit_only)
    ack(node, append)
    assert node.core.commit_index == append.message.prev_log_index + 1


def test_commit_only_append_is_never_retransmitted() -> None:
    """A retransmission arriving after a later append would make a reference follower
    truncate that append's entries again; a lost commit index rides on the next message."""
    node = make_node(append_timeout_ticks=5, heartbeat_ticks=3)
    _settle(node, elect(node))
    node.core.propose(rid(), b"x", NOW_MS)
    to_n2 = _aes(node.run(), "n2")[0]
    ack(node, to_n2)
    (commit_only,) = _aes(node.tick(1), "n2")
    later = _aes(node.tick(40), "n2")
    assert later and all(m.message is not commit_only.message for m in later)
    assert all(m.message.commit_index == node.core.commit_index for m in later)
