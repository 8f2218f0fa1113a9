"""Leader-side replication: AppendEntries, heartbeats, snapshots, responses.

All retransmission is decided here on ticks. Two modes, chosen by ``max_inflight_messages``:

**Stop-and-wait (1, the default), as the reference leader.** One AppendEntries/InstallSnapshot
in flight per follower; no heartbeat while it is outstanding (it is the heartbeat); on a
timeout the *identical* request object is sent again, which the transport sends under the
*same* msgid. The backoff never stretches that interval beyond half the minimum election
timeout (the request is the follower's heartbeat), and the follower's driver tells its core
about every retransmission it answers from its debounce cache (``heard_from_leader``).
This is what a reference follower needs (docs/protocol.md §6, §8): it truncates its log
after prevLogIndex on every AppendEntries it processes and exits if prevLogIndex is below its
commit index, so a retransmission must be recognised as a duplicate (its debounce key is the
msgid) and never reprocessed after a later message moved its commit index. Throughput does
not suffer much: each request carries everything pending, up to ``max_append_bytes``.

**Pipelined (> 1), only for clusters of raftlog peers** (whose followers never truncate a
matching suffix nor exit). Rules that keep such followers consistent:

* prevLogIndex only moves below ``lastIndex + 1`` on a rejection, so it never drops below
  what the follower may have committed;
* a heartbeat's prevLogIndex is ``next - 1``, the last index already sent in this pipeline,
  never an older match point (which would cut off entries still in flight);
* on a timeout or a rejection the whole pipeline is abandoned (late rejections are ignored,
  late successes still raise ``match``) and resent from the oldest unacknowledged
  prevLogIndex with new requests; each timeout doubles that follower's timeouts (up to
  ``MAX_BACKOFF``) until it answers again;
* ``match`` never decreases, and only answers to requests of the current term count.
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
    cfg = s.cfg
    last = s.log.last_index
    sent = False
    while pr.next <= last and not pr.pipeline_full(
        cfg.max_inflight_messages, cfg.max_inflight_bytes
    ):
        if not send_append(s, pr):
            return
        sent = True
    if commit_lane and not sent and not pr.inflight and pr.sent_commit < s.commit:
        send_commit(s, pr)  # an idle follower learns the new commit index on this tick
    if read_index.wants_heartbeat(s, pr) and not pr.pipeline_full(
        cfg.max_inflight_messages, cfg.max_inflight_bytes
    ):
        # confirms leadership for the waiting reads (a commit-lane message does not: it is
        # not in flight, so its answer carries no read sequence)
        send_append(s, pr, empty=True)


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
        elif inflight and s.cfg.max_inflight_messages == 1:
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
    """No answer in time. Stop-and-wait (and any snapshot chunk): send the identical request
    again (same msgid on the wire). Pipelined: abandon the pipeline and resend from the oldest
    unacknowledged prevLogIndex with new requests (the follower may have lost them)."""
    oldest = pr.inflight[0].request
    pr.backoff = min(pr.backoff * 2, MAX_BACKOFF)
    if s.cfg.max_inflight_messages == 1 or pr.state is ProgressState.SNAPSHOT:
        sent = pr.inflight[0]
        base = (
            s.cfg.append_entries_timeout_ticks
            if isinstance(oldest, InstallSnapshot) or oldest.entries
            else s.cfg.append_timeout_ticks
        )
        sent.sent_at = s.now
        sent.timeout = min(base * pr.backoff, max(base, _max_retransmit_interval(s)))
        pr.last_sent_at = s.now
        s.send(pr.peer_id, oldest)
        return
    assert isinstance(oldest, AppendEntries)
    pr.become_probe(oldest.prev_log_index + 1, one_entry=False)
    pump(s, pr)


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
    if response.success and peer in s.departing:
        leader.release_departed(s, peer, request)
        if s.progress.get(peer) is not pr:
            return  # it knows it was removed: nothing more to send it
    sent = pr.find(request)
    read_index.note_answer(s, peer, sent)
    if sent is None:
        # Abandoned generation: a success is still true (and may be the only answer that
        # ever arrives on a link slower than the timeout); a rejection may be stale.
        if response.success:
            if pr.acknowledge(request.prev_log_index + len(request.entries)):
                leader.maybe_commit(s)
            if pr.state is ProgressState.PROBE and s.progress.get(peer) is pr:
                pr.become_replicate()
                pump(s, pr)
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
