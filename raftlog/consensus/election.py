"""Elections: campaigning, RequestVote receiver rules (docs/protocol.md §7) and vote counting.

Wire-visible behaviour follows the reference, including ``preventSpiralElections`` (§12.1):
while a candidate has not heard *any* answer from a majority of each configuration half it
(a) does not start a new term when its timer fires, (b) refuses RequestVotes without adopting
the requester's term and (c) ignores higher terms in vote responses. The response being
processed is counted before the guard is evaluated, as the reference does.

One deliberate difference in (b): a higher-term request from a candidate whose log is at least
as up to date is granted (and its term adopted). Refusing it inflates nothing, but it can
deadlock a cluster: a candidate whose stale configuration names peers that no longer know it
never hears from "a majority" (they drop its requests, §6), stays guarded forever, and
withholds the very vote the most up-to-date candidate needs (found by the simulator).

Extension (``leader_stickiness``, Raft paper §6; ``leader_is_sticky``): a follower that heard
from its leader, or a leader that heard from a quorum, less than a minimum election timeout
ago answers a higher-term RequestVote with ``[currentTerm, false]`` and keeps its term -- a
removed peer that still campaigns cannot depose a working leader through a member that has not
yet learnt of its removal, and a forged RequestVote deposes nobody (issue #24). A
RequestVote marked ``transfer`` (the campaign of a leadership transfer's target, Raft
thesis §3.10 TimeoutNow) is exempt: the leader asked for it.
"""

from __future__ import annotations

from raftlog.bounds import MAX_TERM
from raftlog.consensus import leader
from raftlog.consensus.quorum import VoteResult, has_quorum, vote_result
from raftlog.consensus.ready import CampaignRefused, Role
from raftlog.consensus.state import CoreState
from raftlog.rpc.messages import RequestVote, RequestVoteResponse


def heard_from_majority(s: CoreState) -> bool:
    """Has this candidate got answers (either way) from a majority of every half?"""
    return has_quorum(s.membership.groups, s.votes)


def _spiral_guard_active(s: CoreState) -> bool:
    return (
        s.cfg.prevent_spiral_elections and s.role is Role.CANDIDATE and not heard_from_majority(s)
    )


def leader_is_sticky(s: CoreState) -> bool:
    """Leader stickiness (Raft §6, etcd's check-quorum lease): a current leader is being
    heard, so a higher-term RequestVote is refused *without adopting its term*.

    * A follower (or non-voting member) heard from its leader less than a minimum election
      timeout ago.
    * A leader heard from a quorum (its own vote included) within a minimum election
      timeout: its followers would refuse the candidate anyway, and adopting a forged term
      would only depose it (issue #24: one forged RequestVote per peer left a cluster
      leaderless). A leader that cannot hear a quorum is not sticky, so a candidate that
      needs its vote still gets it.

    The one place this rule lives: a deliberate leadership transfer (TimeoutNow) must bypass
    exactly this predicate and nothing else. Deterministic: judged in ticks (``s.now``)."""
    if not s.cfg.leader_stickiness:
        return False
    window = s.cfg.election_ticks[0]
    if s.role is Role.LEADER:
        heard = {
            peer
            for peer, pr in s.progress.items()
            if pr.heard_at is not None and s.now - pr.heard_at < window
        }
        heard.add(s.id)
        return has_quorum(s.membership.groups, heard)
    contact = s.leader_contact
    return (
        s.leader_id is not None
        and contact is not None
        and s.role in (Role.FOLLOWER, Role.CLIENT)
        and s.now - contact < window
    )


def on_election_timeout(s: CoreState) -> None:
    """§5.2: a follower or candidate that heard nothing for a whole timeout campaigns."""
    if _spiral_guard_active(s):
        s.reset_election_timer()  # (a): keep the term, keep retransmitting the requests
        return
    campaign(s)


def campaign(s: CoreState, transfer: bool = False) -> None:
    """Start an election for ``term + 1`` (a sole voter wins it at once, §12.1); with
    ``transfer``, as the target of a leadership transfer (its RequestVotes say so)."""
    if not s.can_campaign():
        s.reset_election_timer()
        return
    if s.term >= MAX_TERM:
        # term + 1 could not be adopted by anyone (raftlog.bounds): keep following instead
        s.events.append(CampaignRefused(s.term, "term_exhausted"))
        s.reset_election_timer()
        return
    s.term += 1
    s.voted_for = s.id
    s.hard_dirty = True
    s.role = Role.CANDIDATE
    s.leader_id = None
    s.votes = {s.id: True}
    s.vote_sent_at = {}
    s.campaign_transfer = transfer
    s.reset_election_timer()
    if vote_result(s.membership.groups, s.votes) is VoteResult.WON:
        leader.become_leader(s)
        return
    request = RequestVote(s.id, s.term, s.log.last_index, s.log.last_term, s.campaign_transfer)
    for peer in sorted(s.membership.members):
        if peer != s.id:
            s.send_after_persist(peer, request)  # only once term and vote are durable
            s.vote_sent_at[peer] = s.now
    s.campaign_unsent = True


def votes_sent(s: CoreState) -> None:
    """The Ready that made this campaign's term and vote durable has been carried out, so its
    RequestVotes have left: the candidate's timer starts now. Counting the time of its own
    fsync as well made a candidate whose disk is slower than the election timeout give up
    each term just as its requests left, before any answer could come back (elections
    that never converged under a loaded disk: issue #12)."""
    s.campaign_unsent = False
    if s.role is Role.CANDIDATE:
        s.election_elapsed = 0
        s.vote_sent_at = dict.fromkeys(s.vote_sent_at, s.now)
        s.votes_left = True  # sent at the end of the current tick span (``RaftCore.tick``)


def retransmit_votes(s: CoreState) -> None:
    """RequestVote is re-sent (as a new request) every ``vote_timeout_ticks`` until answered."""
    due = [
        peer
        for peer, sent_at in s.vote_sent_at.items()
        if peer not in s.votes and s.now - sent_at >= s.cfg.vote_timeout_ticks
    ]
    if not due:
        return
    request = RequestVote(s.id, s.term, s.log.last_index, s.log.last_term, s.campaign_transfer)
    for peer in due:
        s.send_after_persist(peer, request)
        s.vote_sent_at[peer] = s.now


def handle_request_vote(s: CoreState, token: object, m: RequestVote) -> None:
    """docs/protocol.md §7 receiver rules, in order."""
    if not s.membership.accepts_sender(m.candidate_id):
        return  # 1. unknown candidate: no response at all
    if m.term < s.term:
        s.reply(token, RequestVoteResponse(s.term, False))  # 2.
        return
    last_term = s.log.last_term
    up_to_date = m.last_log_term > last_term or (
        m.last_log_term == last_term and m.last_log_index >= s.log.last_index
    )
    free = s.voted_for is None or s.voted_for == m.candidate_id or m.term > s.term
    granted = free and up_to_date
    guarded = _spiral_guard_active(s) and not (granted and m.term > s.term)
    if guarded or (m.term > s.term and leader_is_sticky(s) and not m.transfer):
        s.reply(token, RequestVoteResponse(s.term, False))  # 3. term not adopted
        return
    if granted or m.term > s.term:  # 4.
        s.become_follower(m.term, None)
        if granted:
            s.voted_for = m.candidate_id
            s.hard_dirty = True
    s.reply(token, RequestVoteResponse(s.term, granted))


def handle_vote_response(
    s: CoreState, peer: str, request: RequestVote, response: RequestVoteResponse
) -> None:
    """Count one answer; win, or step down on a higher term unless the guard says (c)."""
    current_election = s.role is Role.CANDIDATE and request.term == s.term
    if response.term > s.term:
        if current_election:
            s.votes.setdefault(peer, False)
            if _spiral_guard_active(s):
                return
        s.become_follower(response.term, None)
        return
    if not current_election or peer not in s.membership.members:
        return
    s.votes.setdefault(peer, response.vote_granted)  # a voter counts once per term
    if vote_result(s.membership.groups, s.votes) is VoteResult.WON:
        leader.become_leader(s)
