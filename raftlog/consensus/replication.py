"""Leader-side replication: AppendEntries, heartbeats, snapshots, responses.

All retransmission is decided here on ticks. Two modes, chosen **per follower** by
``window``: a follower whose latest AppendEntries answer carried the pipelining mark
(``AppendEntriesResponse.pipelines``, sent by every raftlog follower on a success) may have
up to ``max_inflight_messages`` requests in flight; any other follower -- a reference peer,
whose answers never carry it, or one whose latest answer was a rejection or that missed a
timeout -- gets stop-and-wait, as the reference leader does it: one AppendEntries or
InstallSnapshot in flight, no heartbeat while it is outstanding (it is the heartbeat).

**The send order, the same in both modes** (what a reference follower needs: it truncates
its log after prevLogIndex on every AppendEntries it processes, exits if prevLogIndex is
below its commit index, and recognises only a retransmission under the msgid it answered
last as a duplicate; docs/protocol.md §6, §8): within one term, a *new* AppendEntries to a
follower never starts below what an earlier one already covered, unless the follower
rejected one since. So:

* prevLogIndex only moves below ``lastIndex + 1`` on a rejection (then the follower is
  probed, one request at a time, from prevLogIndex or its next-index hint);
* a heartbeat's and a commit-only message's prevLogIndex is ``next - 1``, the end of what
  was already sent, never an older match point (which would cut off entries in flight);
* **timeouts**: the newest request in flight is sent again, *identically* (the transport
  sends the same msgid), the older ones are forgotten (late successes still raise
  ``match``, late rejections are ignored) and the window closes until a marked answer
  comes. The follower either processed the newest one (then it answers again, from its
  debounce cache) or its log ends before it (then it rejects with a hint and is probed).
  Resending from the oldest one instead, with a new msgid, is what a reference follower
  that had processed the later ones would exit on. Each timeout doubles that follower's
  timeouts (up to ``MAX_BACKOFF``) until it answers again, but never beyond half the
  minimum election timeout (the request is the follower's heartbeat), and the follower's
  driver tells its core about every retransmission it answers from its cache
  (``heard_from_leader``);
* ``match`` never decreases, and only answers to requests of the current term count.

**Switching.** A follower starts each term at window 1 (its first answer is to a probe). A
marked answer opens the window. An unmarked *success* while several requests are in flight
(the peer at that address is now a reference peer, or a raftlog version without the mark)
closes it: nothing new is sent until those are answered and no heartbeat goes out
meanwhile. Pipelining gains what stop-and-wait loses to one follower trailing the other by
an update (docs/performance.md §2).
"""

from __future__ import annotations

from raftlog.consensus import leader, read_index
from raftlog.consensus.progress import MAX_BACKOFF, Inflight, Progress, ProgressState
from raftlog.consensus.ready import FollowerLostEntries, Role
from raftlog.consensus.state import CoreState
from raftlog.entry import ENTRY_HEADER_SIZE, LogEntry, entries_size
from raftlog.rpc.messages import (
    AppendEntries,
    AppendEntriesResponse,
    InstallSnapshot,
    InstallSnapshotResponse,
)


def flush(s: CoreState) -> None:
    """Send whatever each follower's state allows (called before building a Ready)."""
    s.replication_dirty = False
    for progress in list(s.progress.values()):
        pump(s, progress)


def pump(s: CoreState, pr: Progress, *, commit_lane: bool = False) -> None:
    """Send ``pr``'s peer what its state allows now (entries within the pipeline's limits, or the
    next snapshot chunk). ``commit_lane``: an idle follower behind on the commit index gets a
    commit-only message now (``send_commit``); only the tick asks for it (see there why)."""
    if pr.state is ProgressState.SNAPSHOT:
        if not pr.inflight:
            send_snapshot_chunk(s, pr)
        return
    if pr.state is ProgressState.PROBE:
        if not pr.inflight:
            send_append(s, pr, one_entry=pr.probe_one_entry)
        return
    max_messages, max_bytes = window(s, pr), s.cfg.max_inflight_bytes
    last = s.log.last_index
    sent = False
    while pr.next <= last and not pr.pipeline_full(max_messages, max_bytes):
        if not send_append(s, pr):
            return
        sent = True
    if commit_lane and not sent and not pr.inflight and pr.sent_commit < s.commit:
        send_commit(s, pr)  # an idle follower learns the new commit index on this tick
    if read_index.wants_heartbeat(s, pr) and not pr.pipeline_full(max_messages, max_bytes):
        # confirms leadership for the waiting reads (a commit-lane message does not: it is
        # not in flight, so its answer carries no read sequence)
        send_append(s, pr, empty=True)


def window(s: CoreState, pr: Progress) -> int:
    """How many AppendEntries may be in flight to ``pr``'s peer: the configured pipeline
    only while it streams (a probe is one request at a time, and no heartbeat may start
    below the probe's end) and its latest answer carried the pipelining mark, else 1
    (module docstring)."""
    if pr.pipelines and pr.state is ProgressState.REPLICATE:
        return s.cfg.max_inflight_messages
    return 1


def send_commit(s: CoreState, pr: Progress) -> None:
    """The commit lane (issue #28): an empty AppendEntries that only carries the commit index
    to an idle follower, *without* taking its replication slot. Held in the slot, it made
    the next entry wait for its answer -- which the leader reads only after its own fsync of
    that entry, so the two fsyncs ran one after the other in about half the updates.

    Why it is safe, for reference followers too: it is sent only while nothing is in flight
    to that follower (so ``prevLogIndex`` is ``next - 1``, the point every later request
    continues from: nothing it truncates is still on its way), it is never retransmitted
    (a lost one costs nothing: the next append or heartbeat carries the commit index; a
    retransmission after a later append could cut that append off), and its answer is
    handled like any answer to a request no longer in flight (``handle_append_response``:
    a success can only raise ``match``, a rejection is ignored). The channel to a follower
    is FIFO, so the follower sees it before the append that follows it.

    Why only on a tick, not as soon as the commit index moves: a new commit index rides on
    the next AppendEntries anyway, and under any steady load that one leaves within a
    fraction of a millisecond (at one update in flight: as soon as the client's next update
    arrives). Sent at once, the commit-only message doubled the peer messages of a lightly
    loaded cluster -- per update two more sends and two more answers to decode on the
    leader, a receive, a step and a reply on each follower -- on the very cores the next
    update needs (issue #28, a trace at one update in flight: the leader sent both before
    it answered the client). Only a follower that stays idle gets it, within a tick
    (``tick_ms``, 10 ms by default): that bounds how long its applied state (its PUB
    broadcast, its committed reads) trails the leader's on an idle cluster. A read that
    must see the leader's commit index confirms it with a heartbeat of its own
    (``read_index``), which carries it."""
    log = s.log
    prev = pr.next - 1
    if prev < log.snapshot_index:
        return  # the follower needs a snapshot: the slot's next request starts it
    prev_term = log.term_at(prev)
    if prev_term is None:  # pragma: no cover - next never exceeds last + 1
        raise AssertionError(f"no term at prevLogIndex {prev}")
    pr.sent_commit = s.commit
    pr.last_sent_at = s.now  # it is also a heartbeat
    s.send(pr.peer_id, AppendEntries(s.id, s.term, prev, prev_term, s.commit, ()))


def send_append(
    s: CoreState, pr: Progress, *, one_entry: bool = False, empty: bool = False
) -> bool:
    """Send AppendEntries from ``pr.next`` (entries unless ``empty``); False when the follower
    needs a snapshot instead."""
    log = s.log
    prev = pr.next - 1
    if prev < log.snapshot_index:
        start_snapshot(s, pr)
        return False
    prev_term = log.term_at(prev)
    if prev_term is None:  # pragma: no cover - next never exceeds last + 1
        raise AssertionError(f"no term at prevLogIndex {prev}")
    cfg = s.cfg
    entries: tuple[LogEntry, ...] = ()
    size = 0
    last = log.last_index
    if not empty and pr.next <= last:
        most = 1 if one_entry else cfg.max_append_bytes // (ENTRY_HEADER_SIZE + 1) + 1
        batch = log.entries(pr.next, min(last, prev + most) + 1, cfg.max_append_bytes)
        entries = tuple(batch)
        size = entries_size(entries)
    request = AppendEntries(s.id, s.term, prev, prev_term, s.commit, entries)
    timeout = cfg.append_entries_timeout_ticks if entries else cfg.append_timeout_ticks
    seq = read_index.note_sent(s, pr.peer_id)
    pr.record(Inflight(request, prev + len(entries), size, s.now, timeout * pr.backoff, seq))
    if pr.state is ProgressState.REPLICATE:
        pr.next = prev + len(entries) + 1  # optimistic: the pipeline continues from there
    pr.sent_commit = s.commit
    s.send(pr.peer_id, request)
    return True


def start_snapshot(s: CoreState, pr: Progress) -> None:
    """The follower needs entries this leader compacted: stream the snapshot (§9)."""
    meta = s.snapshots.meta()
    if meta is None or meta.index < s.log.snapshot_index:
        return  # nothing usable to send yet; retried on the next tick
    pr.become_snapshot(meta)
    refresh_config(s, meta.index)
    send_snapshot_chunk(s, pr)


def refresh_config(s: CoreState, snapshot_index: int) -> None:
    """InstallSnapshot carries no configuration. If the configuration's entry is inside the
    snapshot, re-append it (same peers, fresh request id) so the follower learns it from the
    entries that follow the snapshot."""
    current = s.membership
    if current.index <= snapshot_index and not current.is_joint and current.index <= s.commit:
        leader.append_config(s, current.payload, s.new_request_id())


def send_snapshot_chunk(s: CoreState, pr: Progress) -> None:
    """Send the next chunk of the installed snapshot (back to probing if there is none)."""
    meta = s.snapshots.meta()
    if meta is None:
        pr.become_probe(pr.next, one_entry=False)
        return
    if meta != pr.snapshot:  # replaced while sending: restart with the new one
        pr.snapshot = meta
        pr.snapshot_offset = 0
    offset = min(pr.snapshot_offset, meta.size)
    data = s.snapshots.read(offset, min(s.cfg.max_append_bytes, meta.size - offset))
    request = InstallSnapshot(s.id, s.term, meta.index, meta.term, offset, meta.size, data)
    timeout = s.cfg.append_entries_timeout_ticks * pr.backoff
    seq = read_index.note_sent(s, pr.peer_id)
    pr.record(Inflight(request, meta.index, len(data), s.now, timeout, seq))
    s.send(pr.peer_id, request)


def tick(s: CoreState, count: int = 1) -> None:
    """Timeouts and heartbeats of every follower, once for a span of ``count`` ticks (after
    a stall a timed-out request is re-sent once, not once per tick missed)."""
    now = s.now
    heartbeat = s.cfg.heartbeat_ticks
    for pr in list(s.progress.values()):
        inflight = pr.inflight
        if inflight and now - inflight[0].sent_at >= inflight[0].timeout:
            _on_timeout(s, pr)
        elif inflight and window(s, pr) == 1:
            continue  # the outstanding request is the heartbeat (a reference follower would
            # truncate entries it is still receiving on a heartbeat with an older prevLogIndex)
        elif pr.state is not ProgressState.SNAPSHOT and now - pr.last_sent_at >= heartbeat:
            if pr.state is ProgressState.REPLICATE and pr.next <= s.log.last_index:
                pump(s, pr)
            if now - pr.last_sent_at >= heartbeat:
                send_append(s, pr, empty=True)
        elif not inflight:
            pump(s, pr, commit_lane=True)
    if s.cfg.check_quorum and s.role is Role.LEADER:
        leader.check_quorum(s, count)


def _on_timeout(s: CoreState, pr: Progress) -> None:
    """No answer in time, in either mode: close the window (the follower pipelines again once
    it answers with the mark) and send the newest request in flight again, identically (same
    msgid on the wire); the older ones are forgotten (module docstring, "Timeouts")."""
    pr.backoff = min(pr.backoff * 2, MAX_BACKOFF)
    pr.pipelines = False
    pr.keep_newest()
    sent = pr.inflight[0]
    request = sent.request
    base = (
        s.cfg.append_entries_timeout_ticks
        if isinstance(request, InstallSnapshot) or request.entries
        else s.cfg.append_timeout_ticks
    )
    sent.sent_at = s.now
    sent.timeout = min(base * pr.backoff, max(base, _max_retransmit_interval(s)))
    pr.last_sent_at = s.now
    s.send(pr.peer_id, request)


def _max_retransmit_interval(s: CoreState) -> int:
    """Stop-and-wait sends nothing but the outstanding request while it waits, so its
    retransmissions are the follower's only sign of life from this leader: they must come
    well within the follower's minimum election timeout, whatever the backoff says. (Before
    this cap a follower whose replies were lost saw resends 560 ms apart and campaigned:
    issue #12, finding 3.)"""
    return max(1, s.cfg.election_ticks[0] // 2)


def _current(s: CoreState, peer: str, request_term: int, response_term: int) -> Progress | None:
    """The follower's progress when an answer belongs to this leader's current term."""
    if response_term > s.term:
        s.become_follower(response_term, None)
        return None
    if s.role is not Role.LEADER or request_term != s.term:
        return None
    return s.progress.get(peer)


def handle_append_response(
    s: CoreState, peer: str, request: AppendEntries, response: AppendEntriesResponse
) -> None:
    """A peer's answer to ``AppendEntries``: advance its match and the commit, or back off
    ``next``."""
    pr = _current(s, peer, request.term, response.term)
    if pr is None:
        return
    pr.recent_active = True
    pr.heard_at = s.now
    pr.pipelines = response.pipelines
    if response.success and peer in s.departing:
        leader.release_departed(s, peer, request)
        if s.progress.get(peer) is not pr:
            return  # it knows it was removed: nothing more to send it
    sent = pr.find(request)
    read_index.note_answer(s, peer, sent)
    if sent is None:
        # Abandoned (by a rejection, or forgotten on a timeout): a success is still true, a
        # rejection may be stale. Neither moves the state: the request in flight, which a
        # timeout resends identically until it is answered, does that. (Streaming on from a
        # late success while a probe is out would start a new request below the probe's end.)
        last = request.prev_log_index + len(request.entries)
        if response.success and pr.acknowledge(last):
            leader.maybe_commit(s)
        return
    if pr.state is ProgressState.SNAPSHOT:
        return
    pr.settle_through(sent)
    pr.backoff = 1
    if response.success:
        if pr.acknowledge(sent.last_index):
            leader.maybe_commit(s)
        if pr.state is ProgressState.PROBE:
            pr.become_replicate()
    else:
        # §8 leader side: back off to prevLogIndex, or to the hint if it is smaller.
        next_index = request.prev_log_index
        hint = response.next_index_hint
        if hint is not None and hint < next_index:
            next_index = hint
        if hint is not None and hint <= pr.match:
            # It acknowledged up to ``match`` but its log ends before: it lost durable
            # entries (a wiped data directory). Probing must not stop at ``match + 1``.
            s.events.append(FollowerLostEntries(pr.peer_id, pr.match, hint - 1))
            pr.lost_entries(hint - 1)
        pr.become_probe(max(next_index, 1), one_entry=True)
    if s.role is Role.LEADER and s.progress.get(peer) is pr:
        pump(s, pr)


def handle_snapshot_response(
    s: CoreState, peer: str, request: InstallSnapshot, response: InstallSnapshotResponse
) -> None:
    """A peer's answer to ``InstallSnapshot``: the next chunk, or back to replicating once done."""
    pr = _current(s, peer, request.term, response.term)
    if pr is None:
        return
    pr.recent_active = True
    pr.heard_at = s.now
    sent = pr.find(request)
    read_index.note_answer(s, peer, sent)
    if sent is None or pr.state is not ProgressState.SNAPSHOT:
        return
    pr.settle_through(sent)
    pr.backoff = 1
    meta = pr.snapshot
    sent_for = (request.last_included_index, request.last_included_term)
    if meta is None or (meta.index, meta.term) != sent_for:
        pump(s, pr)
        return
    if response.next_offset is not None:
        pr.snapshot_offset = min(max(response.next_offset, 0), meta.size)
    else:
        end = request.offset + len(request.data)
        if end < request.total_size:
            pr.snapshot_offset = end
        else:  # the last chunk is in: the follower holds everything up to the snapshot
            pr.acknowledge(meta.index)
            pr.next = meta.index + 1
            pr.snapshot = None
            pr.become_replicate()
            leader.maybe_commit(s)
    if s.role is Role.LEADER and s.progress.get(peer) is pr:
        pump(s, pr)
