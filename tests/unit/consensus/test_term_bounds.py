"""Terms and indexes above ``raftlog.bounds``' ceiling are never adopted (issue #12, finding 1).

A forged RequestVote with term 2^53-1 used to be granted and persisted; the peer then failed
to encode its own next RequestVote (term + 1) and crashed at every restart.
"""

from __future__ import annotations

import pytest
from consensus_helpers import Node, elect, entry, make_node, replies, requests
from hypothesis import given
from hypothesis import strategies as st

from raftlog.bounds import (
    ADOPT_CEILING,
    ELECTIONS_RESERVED,
    INDEX_OUT_OF_RANGE,
    MAX_INDEX,
    MAX_TERM,
    TERM_ABOVE_CEILING,
    TERM_OUT_OF_RANGE,
    term_adoptable,
)
from raftlog.consensus import CampaignRefused, MessageDropped, Role
from raftlog.rpc.messages import (
    AppendEntries,
    AppendEntriesResponse,
    InstallSnapshot,
    InstallSnapshotResponse,
    RequestVote,
    RequestVoteResponse,
)
from raftlog.rpc.ranges import peer_message_out_of_range

FORGED_TERMS = (2**53 - 1, 2**53 - 2, MAX_TERM + 1)
"""Above what the codec carries into a peer (``MAX_TERM``)."""


@pytest.mark.parametrize("term", FORGED_TERMS)
def test_forged_request_vote_term_is_dropped_not_adopted(term: int) -> None:
    node = make_node(term=3)
    ready = node.receive(RequestVote("n2", term, 2**53 - 1, 2**53 - 1))
    assert node.core.term == 3 and node.core.voted_for is None
    assert ready.hard_state is None and not replies(ready)
    assert ready.events == (MessageDropped(TERM_OUT_OF_RANGE, "n2", "RequestVote"),)
    assert node.hard_state.load().current_term == 3


def test_a_request_vote_at_the_adoption_ceiling_is_still_a_normal_request() -> None:
    node = make_node(term=3)
    ready = node.receive(RequestVote("n2", ADOPT_CEILING, 0, 0))
    assert node.core.term == ADOPT_CEILING
    assert replies(ready)[0].message == RequestVoteResponse(ADOPT_CEILING, True)


@pytest.mark.parametrize("term", [MAX_TERM, MAX_TERM - 1, ADOPT_CEILING + 1])
def test_terms_a_peer_could_encode_but_not_adopt_are_dropped_and_counted(term: int) -> None:
    """Issue #24: one forged RequestVote at 2^48-1 per peer left a cluster leaderless."""
    node = make_node(term=3)
    ready = node.receive(RequestVote("n2", term, 0, 0))
    assert node.core.term == 3 and node.core.voted_for is None
    assert not replies(ready) and ready.hard_state is None
    assert ready.events == (MessageDropped(TERM_ABOVE_CEILING, "n2", "RequestVote"),)
    candidate = make_node(term=3)  # nor from a vote response
    sent = requests(candidate.tick_until_role(Role.CANDIDATE), RequestVote)[0]
    candidate.answer(sent.to, sent.message, RequestVoteResponse(term, False))
    assert candidate.core.term == 4


def test_after_a_forged_term_at_the_ceiling_a_million_elections_remain() -> None:
    assert ELECTIONS_RESERVED >= 1_000_000
    term, elections = ADOPT_CEILING, 0
    while term < MAX_TERM and term_adoptable(term + 1, term):
        term, elections = term + 1, elections + 1
    assert term == MAX_TERM and elections == ELECTIONS_RESERVED
    assert not term_adoptable(MAX_TERM, ADOPT_CEILING)  # but never in one jump
    assert not term_adoptable(MAX_TERM + 1, MAX_TERM - 1)
    node = make_node(term=ADOPT_CEILING)
    node.receive(RequestVote("n2", ADOPT_CEILING + 1, 0, 0))
    assert node.core.term == ADOPT_CEILING + 1 and node.core.voted_for == "n2"


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


def _leader_with_followers() -> tuple[Node, int]:
    node = make_node(term=1, election_ticks=(10, 20))
    ready = elect(node)
    for sent in requests(ready, AppendEntries):
        node.answer(sent.to, sent.message, AppendEntriesResponse(node.core.term, True))
    return node, node.core.term


def test_a_leader_that_hears_a_quorum_ignores_a_higher_term_request_vote() -> None:
    """Leader stickiness on the leader's side (etcd's check-quorum lease, issue #24)."""
    node, term = _leader_with_followers()
    ready = node.receive(RequestVote("n3", ADOPT_CEILING, 0, 0))
    assert node.core.role is Role.LEADER and node.core.term == term
    assert replies(ready)[0].message == RequestVoteResponse(term, False)
    assert ready.hard_state is None


def test_a_leader_that_no_longer_hears_a_quorum_lets_a_candidate_win() -> None:
    node, term = _leader_with_followers()
    node.tick(10)  # a whole minimum timeout with no answers
    ready = node.receive(RequestVote("n3", term + 1, 5, term))
    assert node.core.term == term + 1
    assert replies(ready)[0].message == RequestVoteResponse(term + 1, True)


def test_a_follower_hearing_its_leader_neither_votes_nor_adopts_the_term() -> None:
    node = make_node(term=2, election_ticks=(10, 20))
    node.receive(AppendEntries("n2", 2, 0, 0, 0))
    node.tick(1)
    ready = node.receive(RequestVote("n3", ADOPT_CEILING, 0, 0))
    assert node.core.term == 2 and node.core.voted_for is None
    assert replies(ready)[0].message == RequestVoteResponse(2, False)


_FIELD = st.one_of(
    st.integers(0, 1000), st.integers(MAX_INDEX - 2, MAX_INDEX + 2), st.integers(0, 2**53)
)


def _reason_field_by_field(terms: tuple[int, ...], indexes: tuple[int, ...]) -> str | None:
    """The definition the fast check must keep: any term above MAX_TERM, then any index."""
    if any(term > MAX_TERM for term in terms):
        return TERM_OUT_OF_RANGE
    if any(index > MAX_INDEX for index in indexes):
        return INDEX_OUT_OF_RANGE
    return None


@given(
    term=_FIELD,
    prev=_FIELD,
    prev_term=_FIELD,
    commit=_FIELD,
    entry_terms=st.lists(_FIELD, max_size=3),
    hint=st.none() | _FIELD,
    other=_FIELD,
)
def test_range_check_is_every_field(
    term: int,
    prev: int,
    prev_term: int,
    commit: int,
    entry_terms: list[int],
    hint: int | None,
    other: int,
) -> None:
    """``peer_message_out_of_range`` compares only each message's highest term and index
    (issue #28); it must still decide exactly as checking every field does."""
    entries = tuple(entry(t) for t in entry_terms)
    cases: list[tuple[object, tuple[int, ...], tuple[int, ...]]] = [
        (
            AppendEntries("n2", term, prev, prev_term, commit, entries),
            (term, prev_term, *entry_terms),
            (prev, commit, prev + len(entries)),
        ),
        (AppendEntriesResponse(term, hint is None, hint), (term,), () if hint is None else (hint,)),
        (RequestVote("n2", term, prev, prev_term), (term, prev_term), (prev,)),
        (InstallSnapshot("n2", term, prev, prev_term, 0, 1, b"x"), (term, prev_term), (prev,)),
        (RequestVoteResponse(term, True), (term,), ()),
        (InstallSnapshotResponse(term, other), (term,), ()),
    ]
    for message, terms, indexes in cases:
        got = peer_message_out_of_range(message)  # type: ignore[arg-type]
        assert got == _reason_field_by_field(terms, indexes), message
