"""RequestUpdate decisions (docs/protocol.md §10.3): leadership, freshness, idempotency by
request id."""

from __future__ import annotations

from consensus_helpers import NOW_MS, elect, entry, make_node, rid

from raftlog.consensus import Appended, Duplicate, Expired, NotLeader
from raftlog.rpc.messages import AppendEntries


def test_propose_on_a_follower_names_the_leader() -> None:
    node = make_node(term=1)
    assert node.core.propose(rid(), b"x", NOW_MS) == NotLeader(None)
    node.receive(AppendEntries("n3", 1, 0, 0, 0))
    assert node.core.propose(rid(), b"x", NOW_MS) == NotLeader("n3")


def test_propose_with_a_request_id_outside_the_acceptance_window_is_expired() -> None:
    node = make_node()
    elect(node)
    too_old = rid(seconds=NOW_MS // 1000 - 8 * 3600)
    too_new = rid(seconds=NOW_MS // 1000 + 16 * 60)
    assert node.core.propose(too_old, b"x", NOW_MS) == Expired()
    assert node.core.propose(too_new, b"x", NOW_MS) == Expired()


def test_propose_appends_a_state_entry_in_the_current_term() -> None:
    node = make_node()
    elect(node)
    result = node.core.propose(rid(), b"payload", NOW_MS)
    assert isinstance(result, Appended)
    appended = node.core.entries(result.index, result.index + 1)[0]
    assert appended.data == b"payload" and appended.term == node.core.term


def test_propose_is_idempotent_while_the_entry_is_not_yet_durable() -> None:
    node = make_node()
    elect(node)
    request_id = rid()
    first = node.core.propose(request_id, b"x", NOW_MS)
    assert isinstance(first, Appended)
    assert node.core.propose(request_id, b"x", NOW_MS) == Duplicate(first.index)
    assert node.core.last_index == first.index


def test_propose_finds_request_ids_appended_under_an_earlier_leader() -> None:
    old = entry(1, request_id=rid(seconds=NOW_MS // 1000 - 9 * 3600))
    node = make_node(entries=(old,), term=1)
    elect(node)
    # known ids are answered from the log, before (and regardless of) the freshness check
    assert node.core.propose(old.request_id, b"x", NOW_MS) == Duplicate(1)
