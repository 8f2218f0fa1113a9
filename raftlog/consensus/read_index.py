"""ReadIndex (Raft thesis §6.4): linearizable reads without writing to the log.

A read that must see every write acknowledged before it began is served by the leader once

1. it knows a commit index at least as high as any acknowledged write: its commit index,
   provided it has committed an entry of its *own* term (before that, its commit index may
   lag what its predecessor acknowledged; a leader without an entry of its term appends a
   CHECKPOINT so that one commits);
2. it has confirmed that it still leads: a quorum (itself included) answered, in this term, a
   request the leader sent *after* the read arrived. A deposed leader that has not heard of
   its successor (a paused process, a minority partition) can never gather that quorum,
   because a majority has moved to a higher term and no longer answers in its term.

Then the read index is handed to the driver (``ReadIndexReady``), which answers once its
state machine has applied that index. A read accepted by a leader that loses office (or
whose term changes) fails with ``ReadIndexFailed`` -- never answered late from a stale view.

Each read gets a sequence number; every AppendEntries/InstallSnapshot the leader sends
records the newest sequence number at the time it was *first* sent (``Inflight.read_seq``;
a retransmission keeps it), and an answer in the current term raises that follower's
``read_acks`` entry. Read ``q`` is confirmed when a quorum has ``read_acks >= q``. While
reads wait, ``wants_heartbeat`` makes idle followers get an empty AppendEntries at once
(instead of at the next heartbeat tick), so a read costs one round trip to the nearest
quorum. Everything here is driven by inputs the core already receives: no clock.
"""

from __future__ import annotations

from raftlog.consensus.progress import Inflight, Progress
from raftlog.consensus.quorum import has_quorum
from raftlog.consensus.ready import ReadIndexFailed, ReadIndexReady, Role
from raftlog.consensus.settings import Bug
from raftlog.consensus.state import CoreState, PendingRead
from raftlog.entry import LogEntry

MAX_PENDING_READS = 10_000
"""Reads queued at once. A leader cut off from its followers keeps its reads until it hears
of a higher term (its driver answers the clients earlier); beyond this it takes no more."""


def request(s: CoreState, context: object) -> bool:
    """Queue a linearizable read on this leader. False when this peer does not lead (the
    caller redirects to ``leader_id``) or already holds ``MAX_PENDING_READS``."""
    if s.role is not Role.LEADER or len(s.pending_reads) >= MAX_PENDING_READS:
        return False
    s.read_seq += 1
    index = s.commit if s.log.term_at(s.commit) == s.term else None
    if index is None and s.log.last_term != s.term:
        # No entry of this term to commit yet (everything inherited was already committed
        # when it took office): write one, so that the read index can be known.
        s.log.append((LogEntry.checkpoint(s.term),))
    s.pending_reads.append(PendingRead(context, s.read_seq, s.term, index))
    s.replication_dirty = True  # heartbeats go out with the next Ready
    return True


def note_sent(s: CoreState, peer: str) -> int:
    """The read sequence a request to ``peer`` that is being sent carries."""
    s.read_sent[peer] = s.read_seq
    return s.read_seq


def note_answer(s: CoreState, peer: str, sent: Inflight | None) -> None:
    """``peer`` answered, in this term, the request recorded as ``sent`` (None: abandoned,
    which proves nothing about when it was sent, so it counts for no read)."""
    if sent is not None and sent.read_seq > s.read_acks.get(peer, 0):
        s.read_acks[peer] = sent.read_seq


def wants_heartbeat(s: CoreState, pr: Progress) -> bool:
    """Does ``pr``'s follower still have to hear a request sent after the newest read?"""
    return bool(s.pending_reads) and s.read_sent.get(pr.peer_id, 0) < s.read_seq


def settle(s: CoreState) -> None:
    """Answer the reads that are confirmed, fail those that cannot be any more (called
    before the driver collects a Ready; cheap when nothing waits)."""
    pending = s.pending_reads
    if not pending:
        return
    if s.role is not Role.LEADER:
        for read in pending:
            s.events.append(ReadIndexFailed(read.context, s.leader_id))
        pending.clear()
        s.read_acks.clear()
        s.read_sent.clear()
        return
    own_term_committed = s.log.term_at(s.commit) == s.term
    unsafe = s.has_bug(Bug.READ_INDEX_WITHOUT_QUORUM)
    while pending:
        read = pending[0]
        if read.term != s.term:
            s.events.append(ReadIndexFailed(read.context, s.leader_id))
            pending.popleft()
            continue
        if read.index is None:
            if not own_term_committed:
                return
            read.index = s.commit
        if unsafe:  # negative control: answers from its own view, leader or not
            read.index = s.commit
        elif not _confirmed(s, read.seq):
            return  # later reads carry higher sequence numbers: none is confirmed either
        s.events.append(ReadIndexReady(read.context, read.index))
        pending.popleft()


def _confirmed(s: CoreState, seq: int) -> bool:
    acks = {peer for peer, acked in s.read_acks.items() if acked >= seq and peer in s.progress}
    acks.add(s.id)
    return has_quorum(s.membership.groups, acks)
