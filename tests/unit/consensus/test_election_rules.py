"""One test per election rule (docs/protocol.md §7, §12.1; Raft §5.2, §5.4.1, §6)."""

from __future__ import annotations

import pytest
from consensus_helpers import config, elect, entry, make_node, replies, requests

from raftlog.consensus import Role
from raftlog.errors import LocalProtocolError
from raftlog.rpc.messages import AppendEntries, RequestVote, RequestVoteResponse


def test_follower_campaigns_after_election_timeout() -> None:
    node = make_node(term=3, election_ticks=(10, 10))
    ready = node.tick(9)
    assert node.core.role is Role.FOLLOWER and not ready.messages_after_persist
    ready = node.tick()
    assert node.core.role is Role.CANDIDATE and node.core.term == 4
    assert ready.hard_state is not None
    assert (ready.hard_state.current_term, ready.hard_state.voted_for) == (4, "n1")


def test_request_votes_leave_only_after_term_and_vote_are_persisted() -> None:
    node = make_node(entries=(entry(1), entry(2)), term=2)
    ready = node.tick_until_role(Role.CANDIDATE)
    assert not requests(ready, RequestVote, now=True)
    sent = requests(ready, RequestVote, now=False)
    assert sorted(m.to for m in sent) == ["n2", "n3"]
    assert sent[0].message == RequestVote("n1", 3, 2, 2)


def test_first_election_timeout_includes_the_startup_margin() -> None:
    node = make_node(election_ticks=(10, 10), first_election_extra_ticks=30)
    node.tick(39)
    assert node.core.role is Role.FOLLOWER
    node.tick()
    assert node.core.role is Role.CANDIDATE


def test_candidate_retransmits_request_vote_until_answered() -> None:
    node = make_node(vote_timeout_ticks=5)
    ready = node.tick_until_role(Role.CANDIDATE)
    vote = requests(ready, RequestVote)[0].message
    node.answer("n2", vote, RequestVoteResponse(vote.term, False))
    ready = node.tick(5)
    assert [m.to for m in requests(ready, RequestVote)] == ["n3"]


def test_candidate_wins_with_a_majority_of_votes() -> None:
    node = make_node()
    elect(node, grant_from=("n2",))
    assert node.core.role is Role.LEADER and node.core.leader_id == "n1"


def test_duplicate_vote_responses_count_once() -> None:
    node = make_node(members=config("n1", "n2", "n3", "n4", "n5"))
    ready = node.tick_until_role(Role.CANDIDATE)
    vote = requests(ready, RequestVote)[0].message
    for _ in range(3):
        node.answer("n2", vote, RequestVoteResponse(vote.term, True))
    assert node.core.role is Role.CANDIDATE


def test_joint_config_needs_a_vote_majority_of_both_halves() -> None:
    joint = config("n1", "n4", "n5", old=("n1", "n2", "n3"))
    node = make_node(members=config("n1", "n2", "n3"), saved_config=joint)
    ready = node.tick_until_role(Role.CANDIDATE)
    votes = {m.to: m.message for m in requests(ready, RequestVote)}
    assert sorted(votes) == ["n2", "n3", "n4", "n5"]
    node.answer("n2", votes["n2"], RequestVoteResponse(votes["n2"].term, True))
    assert node.core.role is Role.CANDIDATE  # old half won, new half not yet
    node.answer("n4", votes["n4"], RequestVoteResponse(votes["n4"].term, True))
    assert node.core.role is Role.LEADER


def test_sole_member_becomes_leader_immediately() -> None:
    node = make_node(members=config("n1"), term=4)
    assert node.core.role is Role.LEADER and node.core.term == 5
    assert node.hard_state.load().current_term == 5


def test_vote_from_unknown_candidate_gets_no_response() -> None:
    node = make_node()
    ready = node.receive(RequestVote("n9", 5, 10, 5))
    assert not replies(ready) and node.core.term == 0


def test_vote_rejected_for_stale_term() -> None:
    node = make_node(term=5)
    ready = node.receive(RequestVote("n2", 4, 10, 4))
    assert replies(ready)[0].message == RequestVoteResponse(5, False)


def test_vote_granted_only_after_it_is_persisted() -> None:
    node = make_node(term=1)
    node.core.step_request("tok", RequestVote("n2", 2, 0, 0))
    ready = node.core.ready()
    assert not ready.messages_now
    assert ready.hard_state is not None and ready.hard_state.voted_for == "n2"
    assert ready.messages_after_persist[0].message == RequestVoteResponse(2, True)


def test_vote_rejected_when_candidate_log_is_behind() -> None:
    node = make_node(entries=(entry(1), entry(3)), term=3)
    older_term = node.receive(RequestVote("n2", 4, 5, 2))
    shorter = node.receive(RequestVote("n3", 5, 1, 3))
    assert replies(older_term)[0].message == RequestVoteResponse(4, False)
    assert replies(shorter)[0].message == RequestVoteResponse(5, False)
    assert node.core.voted_for is None


def test_vote_not_granted_twice_in_one_term() -> None:
    node = make_node(term=1)
    node.receive(RequestVote("n2", 2, 0, 0))
    again = node.receive(RequestVote("n2", 2, 0, 0))
    other = node.receive(RequestVote("n3", 2, 0, 0))
    assert replies(again)[0].message == RequestVoteResponse(2, True)
    assert replies(other)[0].message == RequestVoteResponse(2, False)
    assert node.hard_state.load().voted_for == "n2"


def test_higher_term_vote_request_adopts_the_term_even_when_refused() -> None:
    node = make_node(entries=(entry(2),), term=2, voted_for="n1")
    ready = node.receive(RequestVote("n2", 7, 0, 0))
    assert replies(ready)[0].message == RequestVoteResponse(7, False)
    assert node.hard_state.load().current_term == 7
    assert node.hard_state.load().voted_for is None


def test_leader_steps_down_on_higher_term_vote_request_once_it_hears_no_quorum() -> None:
    node = make_node(election_ticks=(10, 20))
    elect(node)
    node.receive(RequestVote("n3", node.core.term + 1, 10, 10))
    assert node.core.role is Role.LEADER  # just elected: its voters are its quorum (#24)
    node.tick(10)
    node.receive(RequestVote("n3", node.core.term + 1, 10, 10))
    assert node.core.role is Role.FOLLOWER


def test_without_stickiness_a_leader_steps_down_on_higher_term_vote_request() -> None:
    node = make_node(leader_stickiness=False)
    elect(node)
    node.receive(RequestVote("n3", node.core.term + 1, 10, 10))
    assert node.core.role is Role.FOLLOWER


def test_spiral_guard_keeps_term_when_no_majority_answered() -> None:
    node = make_node(election_ticks=(10, 10))
    node.tick_until_role(Role.CANDIDATE)
    term = node.core.term
    node.tick(50)
    assert node.core.term == term and node.core.role is Role.CANDIDATE


def test_without_spiral_guard_candidate_starts_new_terms() -> None:
    node = make_node(election_ticks=(10, 10), prevent_spiral_elections=False)
    node.tick_until_role(Role.CANDIDATE)
    term = node.core.term
    node.tick(10)  # counted from the end of the span in which its RequestVotes left
    assert node.core.term == term
    node.tick()
    assert node.core.term == term + 1


def test_spiral_guard_refuses_votes_without_adopting_the_term() -> None:
    node = make_node(entries=(entry(1), entry(1)), term=1)
    node.tick_until_role(Role.CANDIDATE)
    term = node.core.term
    ready = node.receive(RequestVote("n2", term + 5, 1, 1))  # log behind: refused
    assert replies(ready)[0].message == RequestVoteResponse(term, False)
    assert node.core.term == term and node.core.role is Role.CANDIDATE


def test_spiral_guard_still_grants_an_up_to_date_higher_term_candidate() -> None:
    node = make_node(entries=(entry(1),), term=1)
    node.tick_until_role(Role.CANDIDATE)
    ready = node.receive(RequestVote("n2", node.core.term + 5, 1, 1))
    assert replies(ready)[0].message == RequestVoteResponse(node.core.term, True)
    assert node.core.role is Role.FOLLOWER and node.core.voted_for == "n2"


def test_spiral_guard_ignores_higher_term_in_vote_response_until_majority_answered() -> None:
    node = make_node(members=config("n1", "n2", "n3", "n4", "n5"))
    ready = node.tick_until_role(Role.CANDIDATE)
    votes = {m.to: m.message for m in requests(ready, RequestVote)}
    term = node.core.term
    node.answer("n2", votes["n2"], RequestVoteResponse(term + 3, False))
    assert node.core.term == term  # 2 of 5 answered: ignored
    node.answer("n3", votes["n3"], RequestVoteResponse(term + 3, False))
    assert node.core.role is Role.FOLLOWER and node.core.term == term + 3


def test_candidate_steps_down_on_append_entries_of_its_term() -> None:
    node = make_node()
    node.tick_until_role(Role.CANDIDATE)
    term = node.core.term
    node.receive(AppendEntries("n2", term, 0, 0, 0))
    assert node.core.role is Role.FOLLOWER and node.core.leader_id == "n2"
    assert node.core.voted_for == "n1"  # a same-term step-down never clears the vote


def test_leader_stickiness_refuses_disruptive_vote_request() -> None:
    node = make_node(term=3)
    node.receive(AppendEntries("n2", 3, 0, 0, 0))
    ready = node.receive(RequestVote("n3", 9, 5, 5))
    assert replies(ready)[0].message == RequestVoteResponse(3, False)
    assert node.core.term == 3 and node.core.leader_id == "n2"
    # the contact counts from the end of the tick span it was read in (the first tick);
    # a whole minimum election timeout after that it votes again
    node.tick(21)
    ready = node.receive(RequestVote("n3", 9, 5, 5))
    assert node.core.term == 9


def test_client_peer_never_campaigns_but_grants_votes() -> None:
    node = make_node("n4", members=config("n1", "n2", "n3"))
    assert node.core.role is Role.CLIENT
    node.tick(500)
    assert node.core.role is Role.CLIENT and node.core.term == 0
    ready = node.receive(RequestVote("n2", 1, 0, 0))
    assert replies(ready)[0].message == RequestVoteResponse(1, True)


def test_leader_heard_before_a_long_tick_span_keeps_the_follower_from_campaigning() -> None:
    """A paused or starved follower reads the leader's queued AppendEntries, then the driver
    ticks for the whole time it was away: the span must not run its timer out (issue #12:
    a resumed old leader campaigned this way and deposed the healthy new leader)."""
    node = make_node(term=3, election_ticks=(20, 30))
    node.receive(AppendEntries("n2", 4, 0, 0, 0))
    node.core.tick(100)
    ready = node.run()
    assert node.core.role is Role.FOLLOWER and node.core.term == 4
    assert not requests(ready, RequestVote)
    # and it is sticky for a minimum election timeout from the end of that span
    ready = node.receive(RequestVote("n3", 9, 0, 0))
    assert replies(ready)[0].message == RequestVoteResponse(4, False)
    # silence afterwards still makes it campaign after a normal timeout
    node.tick_until_role(Role.CANDIDATE, limit=31)
    assert node.core.term == 5


def test_a_long_tick_span_without_the_leader_runs_the_timer_out() -> None:
    """Nothing queued from the leader: a span longer than the timeout elects, as before."""
    node = make_node(term=3, election_ticks=(20, 30))
    node.receive(AppendEntries("n2", 3, 0, 0, 0))
    node.tick()  # the span in which the leader was heard
    node.core.tick(100)
    ready = node.run()
    assert node.core.role is Role.CANDIDATE and node.core.term == 4
    assert sorted(m.to for m in requests(ready, RequestVote)) == ["n2", "n3"]


def test_tick_count_must_be_positive() -> None:
    node = make_node()
    with pytest.raises(LocalProtocolError):
        node.core.tick(0)


def test_candidate_timer_starts_when_its_request_votes_leave() -> None:
    """A slow fsync of the candidate's term and vote does not eat its election timeout: the
    timer (and the retransmission timer) start when the persisted Ready is carried out."""
    node = make_node(
        term=3, election_ticks=(20, 20), vote_timeout_ticks=5, prevent_spiral_elections=False
    )
    node.tick(19)
    node.core.tick()  # the timer fires: a campaign for term 4, its Ready not yet carried out
    assert node.core.role is Role.CANDIDATE and node.core.term == 4
    ready = node.core.ready()
    node.core.tick(25)  # the fsync of term 4 takes longer than the whole election timeout
    assert node.core.term == 4  # still this campaign: nothing was sent yet
    node.executor.execute(ready)  # persisted; the RequestVotes leave now
    node.run()
    ready = node.tick(4)
    assert node.core.term == 4 and not requests(ready, RequestVote)  # no resend yet
    ready = node.tick()
    assert [m.to for m in requests(ready, RequestVote)] == ["n2", "n3"]  # 5 ticks after
    node.tick(15)
    assert node.core.role is Role.CANDIDATE and node.core.term == 4
    node.tick()  # 20 ticks after the span in which the requests left
    assert node.core.term == 5


# -- leadership transfer and drain (issue #33 item 10) ----------------------------------------
def test_a_transfer_campaign_passes_leader_stickiness() -> None:
    """The target of a transfer campaigns at once with RequestVotes marked ``transfer``; a
    sticky follower grants those (the leader asked for them) and still refuses the rest."""
    node = make_node(term=3)
    node.receive(AppendEntries("n2", 3, 0, 0, 0))
    ready = node.receive(RequestVote("n3", 4, 0, 0, transfer=True))
    assert replies(ready)[0].message == RequestVoteResponse(4, True)
    sticky = make_node(term=3)
    sticky.receive(AppendEntries("n2", 3, 0, 0, 0))
    ready = sticky.receive(RequestVote("n3", 4, 0, 0))
    assert replies(ready)[0].message == RequestVoteResponse(3, False)


def test_take_leadership_campaigns_at_once_with_marked_votes() -> None:
    node = make_node(term=3)
    node.receive(AppendEntries("n2", 3, 0, 0, 0))
    assert node.core.take_leadership() is None
    ready = node.run()
    assert node.core.role is Role.CANDIDATE and node.core.term == 4
    sent = [m.message for m in requests(ready, RequestVote)]
    assert sent and all(isinstance(m, RequestVote) and m.transfer for m in sent)
    resent = [m.message for m in requests(node.tick(15), RequestVote)]  # retransmissions
    assert resent and all(isinstance(m, RequestVote) and m.transfer for m in resent)


def test_a_drained_peer_never_campaigns_nor_takes_leadership() -> None:
    node = make_node(term=3)
    node.core.set_drained(True)
    node.tick(500)
    assert node.core.role is Role.FOLLOWER and node.core.term == 3
    assert node.core.take_leadership() == "this peer is drained"
    ready = node.receive(RequestVote("n2", 4, 0, 0))  # it still votes
    assert replies(ready)[0].message == RequestVoteResponse(4, True)
    node.core.set_drained(False)
    node.tick_until_role(Role.CANDIDATE)
