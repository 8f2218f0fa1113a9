"""Leader duties (docs/protocol.md §12.2, §12.4): taking office, the commit rule, membership steps.

* On election every follower starts at ``next = lastIndex + 1`` (never below what it may have
  committed) and a CHECKPOINT entry is appended when the last entry is from an older term and
  not known committed, because only current-term entries commit by counting (§5.4.2).
* The leader's own copy counts towards the quorum only once it is durable
  (``RaftLog.persisted_last_index``), so ``messages_now`` may leave before the fsync.
* Joint consensus: as soon as the joint entry is known committed -- also by a leader that
  inherited it -- C(new) is appended with a fresh leader-generated request id; a leader that
  is not in a committed C(new) steps down to CLIENT.
"""

from __future__ import annotations

from raftlog.consensus.membership import Membership
from raftlog.consensus.progress import Progress
from raftlog.consensus.quorum import committed_index, has_quorum
from raftlog.consensus.ready import ConfigChangeCompleted, Role, SteppedDown
from raftlog.consensus.settings import Bug
from raftlog.consensus.state import CoreState
from raftlog.entry import EntryType, LogEntry
from raftlog.rpc.config import encode_config_payload
from raftlog.rpc.messages import AppendEntries, ConfigPayload


def become_leader(s: CoreState) -> None:
    """Won the election: set up each peer's progress and append the term's no-op entry (Raft §8), so
    earlier entries can commit."""
    voters = [peer for peer, granted in s.votes.items() if granted]
    s.role = Role.LEADER
    s.leader_id = s.id
    s.votes = {}
    s.vote_sent_at = {}
    s.pending_change = None
    s.quorum_elapsed = 0
    s.progress = {}
    sync_progress(s)
    for peer in voters:  # a vote just granted is hearing from that peer
        if (pr := s.progress.get(peer)) is not None:
            pr.heard_at = s.now
    if s.log.last_term != s.term and s.commit < s.log.last_index:
        s.log.append((LogEntry.checkpoint(s.term),))
    advance_config(s)
    s.replication_dirty = True


def sync_progress(s: CoreState) -> None:
    """Track the other members of the configuration in effect (a new peer starts probing at
    the end of the log like everyone else), plus the *departing* peers.

    Departing: when a final C(new) leaves out voters of the joint configuration before it,
    this leader keeps replicating to them until one acknowledges an AppendEntries that
    carries a commit index at or above C(new) (``release_departed``). Without that a removed
    peer never learns of its removal -- its last configuration is the joint one, which still
    has it -- and campaigns forever against peers that drop its requests (issue #13 item 5).
    Departing peers never count towards a quorum (quorums are computed over the
    configuration's groups only)."""
    current = s.membership
    wanted = current.members - {s.id}
    if current.is_joint:
        s.departing = {}
    else:
        previous = s.history.previous_payload()
        leaving = () if previous is None or previous.old is None else previous.all_peers()
        s.departing = {
            p.id: p
            for p in leaving
            if p.id not in wanted and p.id != s.id and (p.id in s.progress or p.id in s.departing)
        }
    for peer in list(s.progress):
        if peer not in wanted and peer not in s.departing:
            del s.progress[peer]
    next_index = s.log.last_index + 1
    for peer in sorted(wanted):
        if peer not in s.progress:
            s.progress[peer] = Progress(peer, next_index, s.now)


def release_departed(s: CoreState, peer: str, request: AppendEntries) -> None:
    """A departing peer acknowledged ``request``: once the commit index it let the peer
    reach covers the configuration that removed it, it knows; stop replicating to it."""
    current = s.membership
    learnt = min(request.commit_index, request.prev_log_index + len(request.entries))
    if peer in s.departing and current.index <= min(learnt, s.commit):
        del s.departing[peer]
        s.progress.pop(peer, None)


def own_match(s: CoreState) -> int:
    """The leader's own match index: only what is durable here counts towards a quorum."""
    if s.has_bug(Bug.LEADER_ACK_BEFORE_PERSIST):
        return s.log.last_index
    return s.log.persisted_last_index


def maybe_commit(s: CoreState) -> None:
    """Advance the commit index to what a quorum holds, if that entry is from this term."""
    membership = s.membership
    match = {peer: progress.match for peer, progress in s.progress.items()}
    if s.id in membership.members:
        match[s.id] = own_match(s)
    index = committed_index(membership.groups, match)
    if index <= s.commit:
        return
    if s.log.term_at(index) != s.term and not s.has_bug(Bug.COMMIT_PREVIOUS_TERM_BY_COUNT):
        return  # §5.4.2: never commit an older term's entry by counting replicas
    s.commit_to(index)
    s.replication_dirty = True  # idle followers learn the new commit index at once
    advance_config(s)


def advance_config(s: CoreState) -> None:
    """Take the next membership step once the configuration in effect is committed."""
    current = s.membership
    if s.role is not Role.LEADER or current.index > s.commit:
        return
    if current.is_joint:
        final_index = append_config(s, ConfigPayload(new=current.payload.new), s.new_request_id())
        s.events.append(ConfigChangeCompleted(current.index, final_index))
        s.pending_change = None
    elif s.id not in current.members:
        step_down(s, Role.CLIENT, "removed")


def append_config(s: CoreState, payload: ConfigPayload, request_id: bytes) -> int:
    """Append a CONFIG entry; it takes effect immediately (§12.4)."""
    entry = LogEntry(request_id, EntryType.CONFIG, s.term, encode_config_payload(payload))
    index = s.log.append((entry,))
    s.history.append(Membership(payload, index))
    s.config_changed()
    sync_progress(s)
    s.replication_dirty = True
    return index


def step_down(s: CoreState, role: Role, reason: str) -> None:
    """Stop leading in the current term (the vote is kept: same term)."""
    s.events.append(SteppedDown(s.term, reason))
    s.role = role if role is Role.CLIENT else s.member_role()
    s.leader_id = None
    s.progress = {}
    s.departing = {}
    s.pending_change = None
    s.reset_election_timer()


def check_quorum(s: CoreState, ticks: int = 1) -> None:
    """Extension: step down after a whole minimum election timeout without hearing from a
    quorum (a partitioned leader then stops accepting proposals it cannot commit). A span of
    ``ticks`` is judged once, on the answers read during it: a leader that was stalled
    keeps office if its followers' answers were waiting for it."""
    s.quorum_elapsed += ticks
    if s.quorum_elapsed < s.cfg.election_ticks[0]:
        return
    s.quorum_elapsed = 0
    active = {peer for peer, progress in s.progress.items() if progress.recent_active}
    for progress in s.progress.values():
        progress.recent_active = False
    active.add(s.id)
    if not has_quorum(s.membership.groups, active):
        step_down(s, Role.FOLLOWER, "check_quorum")
