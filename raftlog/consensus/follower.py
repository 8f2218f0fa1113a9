"""Receiver side of AppendEntries (docs/protocol.md §8) and InstallSnapshot (§9).

Deliberate differences from the reference follower, all invisible to a reference leader:

* Plain-Raft append: the log is truncated only at a real term conflict. A matching prefix, a
  stale or duplicated AppendEntries, or an empty heartbeat never removes entries (the
  reference truncates after prevLogIndex on every AppendEntries).
* The commit index moves to ``min(leaderCommit, last index verified by this request)``, never
  to the local last index (which may hold stale, unverified entries).
* A truncation at or below the commit index is refused with a failure reply and a
  ``TruncationRefused`` event instead of exiting.
* A CONFIG entry takes effect when appended and is rolled back if it is truncated.
* prevLogIndex below the snapshot is not a conflict: those entries are committed and covered.
* Requests from a leader outside this peer's configuration are processed, not dropped (the
  reference drops them, §8 rule 1). Only the leader of a term sends them, so following it is
  safe; dropping them deadlocks a peer that was removed and re-added while it was down (its
  old configuration lacks the new leader), and answering a stale removed leader makes it step
  down. RequestVote from outside the configuration is still dropped (``election``).
"""

from __future__ import annotations

from raftlog.consensus.membership import Membership, decode_config
from raftlog.consensus.ready import BadConfigEntry, Role, SnapshotChunkWrite, TruncationRefused
from raftlog.consensus.settings import Bug
from raftlog.consensus.state import CoreState
from raftlog.entry import EntryType, LogEntry
from raftlog.rpc.messages import (
    AppendEntries,
    AppendEntriesResponse,
    InstallSnapshot,
    InstallSnapshotResponse,
)


def _accept_leader(s: CoreState, leader_id: str, term: int) -> bool:
    """Steps 1-3 shared by AppendEntries and InstallSnapshot: False when the request must be
    refused (answer already queued, or no answer for an unknown sender)."""
    if s.role is Role.LEADER and term == s.term:
        return False  # two leaders in one term cannot happen; never follow the other one
    if s.role is Role.CANDIDATE or s.leader_id != leader_id or term != s.term:
        s.become_follower(term, leader_id)
    else:
        s.reset_election_timer()  # the common case: the known leader of this term
    s.leader_contact = s.now
    s.leader_heard = True
    return True


def heard_from_leader(s: CoreState, leader_id: str, term: int) -> None:
    """A retransmission the driver answered from its debounce cache (``RaftCore``)."""
    if s.role is Role.FOLLOWER and s.leader_id == leader_id and s.term == term:
        s.reset_election_timer()
        s.leader_contact = s.now
        s.leader_heard = True


def handle_append_entries(s: CoreState, token: object, m: AppendEntries) -> None:
    """A follower's answer to ``AppendEntries`` (Raft §5.3): accept the leader, check the log
    matches at ``prev_log_index``, append, advance the commit."""
    if m.term < s.term or not _accept_leader(s, m.leader_id, m.term):
        s.reply(token, AppendEntriesResponse(s.term, False))
        return
    log = s.log
    prev, prev_term, entries = m.prev_log_index, m.prev_log_term, m.entries
    verified = prev + len(entries)
    snapshot_index = log.snapshot_index
    if prev < snapshot_index:
        skip = snapshot_index - prev  # entries up to the snapshot are committed and held
        if skip > len(entries):
            s.reply(token, _accepted(s))
            return
        prev, prev_term, entries = snapshot_index, entries[skip - 1].term, entries[skip:]
    if log.term_at(prev) != prev_term:
        last = log.last_index
        hint = last + 1 if last < prev else None
        s.reply(token, AppendEntriesResponse(s.term, False, hint))
        return
    if entries and not _merge(s, m, prev, entries):
        s.reply(token, AppendEntriesResponse(s.term, False))
        return
    limit = log.last_index if s.has_bug(Bug.FOLLOWER_COMMIT_TO_LAST_INDEX) else verified
    new_commit = min(m.commit_index, limit)
    if new_commit > s.commit:
        s.commit_to(new_commit)
    s.reply(token, _accepted(s))


def _accepted(s: CoreState) -> AppendEntriesResponse:
    """A success, marked: this follower takes pipelined AppendEntries (it truncates only at a
    real conflict and refuses, never exits, below its commit index), so a raftlog leader may
    keep several in flight to it (``replication.window``)."""
    return AppendEntriesResponse(s.term, True, pipelines=True)


def _merge(s: CoreState, m: AppendEntries, prev: int, entries: tuple[LogEntry, ...]) -> bool:
    """Append what is new after ``prev``; truncate only at a real conflict (§5.3).
    False when the conflict lies at or below the commit index (refused)."""
    log = s.log
    last = log.last_index
    index = prev + 1
    overlap_end = min(last, prev + len(entries))
    while index <= overlap_end and log.term_at(index) == entries[index - prev - 1].term:
        index += 1
    fresh = entries[index - prev - 1 :]
    if not fresh:
        return True  # everything carried is already here: a duplicate or stale request
    rolled_back = False
    if index <= last:
        if index <= s.commit:
            s.events.append(TruncationRefused(m.leader_id, m.term, index, s.commit))
            return False
        log.truncate_and_append(index, fresh)
        rolled_back = s.history.truncate_from(index)
    else:
        log.append(fresh)
    adopted = _adopt_configs(s, index, fresh)
    if rolled_back or adopted:
        s.config_changed()
    return True


def _adopt_configs(s: CoreState, first_index: int, entries: tuple[LogEntry, ...]) -> bool:
    """A configuration takes effect as soon as its entry is in the log (§12.4 (4))."""
    adopted = False
    for offset, entry in enumerate(entries):
        if entry.entry_type != EntryType.CONFIG:
            continue
        index = first_index + offset
        payload = decode_config(entry.data)
        if payload is None:
            s.events.append(BadConfigEntry(index, "undecodable CONFIG entry data"))
            continue
        s.history.append(Membership(payload, index))
        adopted = True
    return adopted


def handle_install_snapshot(s: CoreState, token: object, m: InstallSnapshot) -> None:
    """§9 receiver rules: one pending snapshot per (index, term, size); an out-of-order
    chunk is answered with the offset to resend from; the last chunk installs it."""
    if m.term < s.term or not _accept_leader(s, m.leader_id, m.term):
        s.reply(token, InstallSnapshotResponse(s.term))
        return
    index, size = m.last_included_index, m.total_size
    if index <= s.commit:
        # Everything up to ``index`` is committed here already; installing an older state
        # would move the state machine backwards. Skip to the end of the transfer.
        final = m.offset + len(m.data) >= size
        s.reply(token, InstallSnapshotResponse(s.term, None if final else size))
        return
    key = (index, m.last_included_term, size)
    if s.receiving != key:
        s.receiving = key
        s.received = 0
    if m.offset != s.received or m.offset + len(m.data) > size:
        s.reply(token, InstallSnapshotResponse(s.term, s.received))
        return
    s.snapshot_ops.append(SnapshotChunkWrite(index, m.last_included_term, size, m.offset, m.data))
    s.received += len(m.data)
    if s.received == size:
        s.receiving = None
        s.install_snapshot(index, m.last_included_term, finish_receive=True)
    s.reply(token, InstallSnapshotResponse(s.term))
