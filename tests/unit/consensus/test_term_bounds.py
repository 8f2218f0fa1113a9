"""Terms and indexes above ``raftlog.bounds``' ceiling are never adopted (issue #12, finding 1).

A forged RequestVote with term 2^53-1 used to be granted and persisted; the peer then failed
to encode its own next RequestVote (term + 1) and crashed at every restart.
"""

from __future__ import annotations

import pytest
from consensus_helpers import elect, entry, make_node, replies, requests

from raftlog.bounds import INDEX_OUT_OF_RANGE, MAX_INDEX, MAX_TERM, TERM_OUT_OF_RANGE
from raftlog.consensus import CampaignRefused, MessageDropped, Role
from raftlog.rpc.messages import (
    AppendEntries,
    AppendEntriesResponse,
    InstallSnapshot,
    RequestVote,
    RequestVoteResponse,
)

FORGED_TERMS = (2**53 - 1, 2**53 - 2, MAX_TERM + 1)


@pytest.mark.parametrize("term", FORGED_TERMS)
def test_forged_request_vote_term_is_dropped_not_adopted(term: int) -> None:
    node = make_node(term=3)
    ready = node.receive(RequestVote("n2", term, 2**53 - 1, 2**53 - 1))
    assert node.core.term == 3 and node.core.voted_for is None
    assert ready.hard_state is None and not replies(ready)
    assert ready.events == (MessageDropped(TERM_OUT_OF_RANGE, "n2", "RequestVote"),)
    assert node.hard_state.load().current_term == 3


def test_a_request_vote_at_the_ceiling_is_still_a_normal_request() -> None:
    node = make_node(term=3)
    ready = node.receive(RequestVote("n2", MAX_TERM, 0, 0))
    assert node.core.term == MAX_TERM
    assert replies(ready)[0].message == RequestVoteResponse(MAX_TERM, True)


@pytest.mark.parametrize(
    ("message", "reason"),
    [
        (AppendEntries("n2", 2**53 - 1, 0, 0, 0), TERM_OUT_OF_RANGE),
        (AppendEntries("n2", 5, 0, 0, 0, (entry(2**52),)), TERM_OUT_OF_RANGE),
        (AppendEntries("n2", 5, 0, 2**50, 0), TERM_OUT_OF_RANGE),
        (AppendEntries("n2", 5, 0, 0, MAX_INDEX + 1), INDEX_OUT_OF_RANGE),
        (AppendEntries("n2", 5, MAX_INDEX, 0, 0, (entry(5),)), INDEX_OUT_OF_RANGE),
        (InstallSnapshot("n2", 2**53 - 2, 1, 1, 0, 1, b"x"), TERM_OUT_OF_RANGE),
        (InstallSnapshot("n2", 5, 2**53 - 1, 1, 0, 1, b"x"), INDEX_OUT_OF_RANGE),
        (RequestVote("n2", 5, MAX_INDEX + 1, 1), INDEX_OUT_OF_RANGE),
    ],
)
def test_every_peer_request_is_bounded(message: object, reason: str) -> None:
    node = make_node(term=3)
    ready = node.receive(message)  # type: ignore[arg-type]
    assert node.core.term == 3 and node.core.last_index == 0 and node.core.commit_index == 0
    assert not replies(ready) and ready.hard_state is None and ready.snapshot_ops == ()
    assert [type(e) for e in ready.events] == [MessageDropped]
    assert ready.events[0].reason == reason  # type: ignore[union-attr]


@pytest.mark.parametrize("term", FORGED_TERMS)
def test_forged_response_terms_do_not_depose_a_leader(term: int) -> None:
    node = make_node(term=1)
    ready = elect(node)
    heartbeat = requests(ready, AppendEntries)[0]
    vote = RequestVote("n1", node.core.term, 0, 0)
    node.answer(heartbeat.to, heartbeat.message, AppendEntriesResponse(term, False))
    node.answer("n3", vote, RequestVoteResponse(term, False))
    assert node.core.role is Role.LEADER and node.core.term == 2


def test_a_peer_at_the_ceiling_refuses_to_campaign_instead_of_overflowing() -> None:
    node = make_node(term=MAX_TERM, election_ticks=(10, 10))
    ready = node.tick(10)
    assert node.core.term == MAX_TERM and node.core.role is Role.FOLLOWER
    assert ready.events == (CampaignRefused(MAX_TERM, "term_exhausted"),)
    assert not requests(ready, RequestVote) and ready.hard_state is None
    node.core.campaign()
    assert node.core.term == MAX_TERM


def test_a_core_never_starts_from_an_out_of_range_term() -> None:
    with pytest.raises(ValueError, match="reset-term"):
        make_node(term=2**53 - 1)
