"""``RaftCore``: the public facade of the consensus state machine (contract in the package
docstring of ``raftlog.consensus``)."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Sequence
from random import Random

from raftlog.bounds import TERM_ABOVE_CEILING, term_adoptable
from raftlog.consensus import election, follower, proposals, read_index, replication
from raftlog.consensus.leader import maybe_commit
from raftlog.consensus.ready import (
    CommittedEntries,
    MessageDropped,
    Ready,
    Role,
    SnapshotInstall,
    SoftState,
)
from raftlog.consensus.results import ConfigProposeResult, ProposeResult
from raftlog.consensus.settings import CoreConfig
from raftlog.consensus.state import CoreState
from raftlog.consensus.views import CoreViews
from raftlog.errors import LocalProtocolError
from raftlog.rpc.messages import (
    AppendEntries,
    AppendEntriesResponse,
    ConfigPayload,
    InstallSnapshot,
    InstallSnapshotResponse,
    PeerRequest,
    PeerResponse,
    RequestVote,
    RequestVoteResponse,
)
from raftlog.rpc.ranges import peer_message_out_of_range
from raftlog.storage.base import HardState, LogStore, SnapshotStore


class RaftCore(CoreViews):
    """One Raft peer as a deterministic, I/O-free state machine.

    Build it from durable state only (``hard_state`` as loaded, the stores as opened); the
    commit index restarts at ``hard_state.last_applied``. ``rng`` supplies every random
    choice (election timeouts); ``new_request_id`` the request ids of the CONFIG entries a
    leader writes on its own (C(new), configuration refreshes).
    """

    def __init__(
        self,
        config: CoreConfig,
        log: LogStore,
        snapshots: SnapshotStore,
        hard_state: HardState,
        *,
        seed_config: ConfigPayload,
        rng: Random,
        new_request_id: Callable[[], bytes],
    ) -> None:
        self._s = CoreState(
            config,
            log,
            snapshots,
            hard_state,
            seed_config=seed_config,
            rng=rng,
            new_request_id=new_request_id,
        )
        self._outstanding: Ready | None = None
        self._persisting: deque[Ready] = deque()
        """Dispatched Readies whose writes are not durable yet, oldest first."""
        if self._s.can_campaign() and self._s.membership.members == {config.peer_id}:
            election.campaign(self._s)  # a sole member leads at once (§12.1)

    # -- inputs ---------------------------------------------------------------------------
    def tick(self, count: int = 1) -> None:
        """Advance logical time by ``count`` ticks: the wall time that passed since the
        previous call (election timer, retransmissions, heartbeats).

        Inputs stepped since the previous call count as observed at the *end* of that span,
        which is when the driver read them (it drains its sockets, then ticks for the time
        that passed). So a follower that heard its leader in between does not let the span
        run its election timer out: a peer that was paused (SIGSTOP), starved of CPU or
        stuck in a slow fsync finds the leader's messages queued when it wakes and must not
        campaign on the time it was away -- doing so deposed the healthy new leader after
        every pause (issue #12). Likewise a candidate's timer starts when its RequestVotes
        leave (the Ready persisting its term and vote is carried out), not when it decided
        to campaign: its own slow fsync must not use up the time its voters need to answer.
        A leader handles the span in one step: at most one retransmission per follower, and
        check-quorum counts the answers it just read."""
        if count < 1:
            raise LocalProtocolError(f"tick count must be >= 1, got {count}")
        s = self._s
        heard_leader = s.heard_leader_this_span()
        votes_left, s.votes_left = s.votes_left, False
        s.now += count
        role = s.role
        if role is Role.LEADER:
            replication.tick(s, count)
            return
        if role is Role.CLIENT:
            return
        if role is Role.CANDIDATE:
            if s.campaign_unsent or votes_left:
                return  # its timer starts when its RequestVotes leave (``votes_sent``)
            election.retransmit_votes(s)
        if heard_leader:
            s.leader_contact = s.now  # the timer was restarted by that contact, at span end
            return
        s.election_elapsed += count
        if s.election_elapsed >= s.election_timeout:
            election.on_election_timeout(s)

    def campaign(self) -> None:
        """Start an election now, exactly as if the election timer had fired (operator
        triggered failover, scripted tests). The spiral guard still applies; leaders and
        peers that may not campaign ignore it."""
        if self._s.role in (Role.FOLLOWER, Role.CANDIDATE):
            election.on_election_timeout(self._s)

    def take_leadership(self) -> str | None:
        """Raft's TimeoutNow (thesis §3.10), received by the target of a leadership
        transfer: campaign at once, with RequestVotes that leader stickiness lets through.
        None when it campaigned, else why not (a leader, a drained peer, a peer that may
        not vote under the configuration in effect)."""
        s = self._s
        if s.role is Role.LEADER:
            return "this peer already leads"
        if s.drained:
            return "this peer is drained"
        if s.role not in (Role.FOLLOWER, Role.CANDIDATE) or not s.can_campaign():
            return "this peer is not a voter of the configuration in effect"
        election.campaign(s, transfer=True)
        return None

    def set_drained(self, drained: bool) -> None:
        """Maintenance drain: a drained peer never campaigns (its election timer keeps being
        reset); it still votes and replicates. Handing leadership off is the operator
        tool's job (``raftlog-admin drain``), through :meth:`take_leadership` on another
        peer: a leader that is drained keeps leading until then."""
        self._s.drained = drained

    @property
    def drained(self) -> bool:
        """See :meth:`set_drained`."""
        return self._s.drained

    def step_request(self, token: object, message: PeerRequest) -> None:
        """An inbound peer request; its reply (if any) comes out as ``SendReply(token, ...)``.
        RequestVotes from outside the configuration get no reply at all (§6). A request whose
        term or index is above the ceiling (``raftlog.bounds``) gets none either: it is
        dropped with a ``MessageDropped`` event before anything is adopted, and so is one
        whose term this peer may encode but not adopt (``raftlog.bounds.term_adoptable``)."""
        s = self._s
        if not isinstance(message, AppendEntries | RequestVote | InstallSnapshot):
            raise LocalProtocolError(f"not a peer request: {type(message).__name__}")
        reason = peer_message_out_of_range(message)
        if reason is None and not term_adoptable(message.term, s.term):
            reason = TERM_ABOVE_CEILING
        if reason is not None:
            sender = message.candidate_id if isinstance(message, RequestVote) else message.leader_id
            s.events.append(MessageDropped(reason, sender, type(message).__name__))
            return
        if isinstance(message, AppendEntries):
            follower.handle_append_entries(s, token, message)
        elif isinstance(message, RequestVote):
            election.handle_request_vote(s, token, message)
        else:
            follower.handle_install_snapshot(s, token, message)

    def heard_from_leader(self, leader_id: str, term: int) -> None:
        """The driver answered a retransmission from ``leader_id`` (term ``term``) out of its
        debounce cache instead of stepping it: the leader is alive. A follower of exactly
        that leader and term resets its election timer; anything else is ignored (a stale or
        unknown leader must not keep this peer from campaigning)."""
        follower.heard_from_leader(self._s, leader_id, term)

    def step_response(self, peer_id: str, request: PeerRequest, response: PeerResponse) -> None:
        """A response the transport matched (by msgid) to ``request``, the very object this
        core emitted in ``SendRequest(peer_id, request)``. Late, duplicated and abandoned
        answers are fine: the core ignores what no longer applies. A response carrying a term
        or index above the ceiling is dropped (``MessageDropped``)."""
        s = self._s
        reason = peer_message_out_of_range(response)
        if reason is None and not term_adoptable(response.term, s.term):
            reason = TERM_ABOVE_CEILING
        if reason is not None:
            s.events.append(MessageDropped(reason, peer_id, type(response).__name__))
            return
        if isinstance(request, AppendEntries) and isinstance(response, AppendEntriesResponse):
            replication.handle_append_response(s, peer_id, request, response)
        elif isinstance(request, RequestVote) and isinstance(response, RequestVoteResponse):
            election.handle_vote_response(s, peer_id, request, response)
        elif isinstance(request, InstallSnapshot) and isinstance(response, InstallSnapshotResponse):
            replication.handle_snapshot_response(s, peer_id, request, response)
        else:
            raise LocalProtocolError(
                f"response {type(response).__name__} does not answer {type(request).__name__}"
            )

    def propose(
        self,
        request_id: bytes,
        data: bytes,
        now_ms: int,
        prepare: Callable[[bytes], bytes | Exception] | None = None,
        *,
        latest_ms: int | None = None,
    ) -> ProposeResult:
        """RequestUpdate (§10.3): append a STATE entry unless the request id is known.
        ``now_ms`` is the cluster clock (``raftlog.cluster_clock``), used only for the
        freshness check (§3.1); ``latest_ms`` may widen only its future edge (``is_fresh``).
        ``prepare(data)``, for new requests only: the data to append, or an exception saying
        why not (the result is then ``Refused``)."""
        return proposals.propose(self._s, request_id, data, now_ms, prepare, latest_ms=latest_ms)

    def propose_many(
        self,
        requests: Sequence[tuple[bytes, bytes]],
        now_ms: int,
        prepare: Callable[[bytes], bytes | Exception] | None = None,
        *,
        latest_ms: int | None = None,
    ) -> list[ProposeResult]:
        """RequestUpdates ``(request_id, data)`` in arrival order, each decided as ``propose``
        would one after the other, with one id lookup and one append for all (the leader's
        ROUTER drain, issue #28); one result per request."""
        return proposals.propose_many(self._s, requests, now_ms, prepare, latest_ms=latest_ms)

    def propose_config(
        self, request_id: bytes, peers: object, now_ms: int, *, latest_ms: int | None = None
    ) -> ConfigProposeResult:
        """ConfigUpdate (§10.4). ``peers`` is the decoded JSON peer list as received (it is
        validated here, so that refusals carry the reference's exact error texts)."""
        return proposals.propose_config(self._s, request_id, peers, now_ms, latest_ms=latest_ms)

    def stamp_time(self, time_ms: int) -> int | None:
        """Leader only: append a time checkpoint carrying cluster time ``time_ms`` (the driver
        reads its ``ClusterClock``; the core never reads a clock). Returns its index."""
        return proposals.stamp_time(self._s, time_ms)

    def read_index(self, context: object) -> bool:
        """A linearizable read (ReadIndex, ``raftlog.consensus.read_index``): on a leader,
        queue it and return True; its answer comes out as a ``ReadIndexReady(context,
        index)`` event (serve it once ``index`` is applied) or ``ReadIndexFailed`` when this
        peer stops leading first. False on any other peer: redirect to ``leader_id``."""
        return read_index.request(self._s, context)

    def applied(self, index: int) -> None:
        """The state machine has durably applied everything up to ``index`` (also after
        restoring a snapshot). Carried as ``last_applied`` by later hard states."""
        self._s.applied = max(self._s.applied, index)

    # -- output ---------------------------------------------------------------------------
    def has_ready(self) -> bool:
        """Is there work for the driver? False while a Ready is out and not yet advanced.
        Cheap (no allocation): drivers call it after every input."""
        s = self._s
        if s.pending_reads:
            read_index.settle(s)
        if self._outstanding is not None:
            return False
        if s.replication_dirty and s.role is Role.LEADER:
            replication.flush(s)
        reported = s.reported_soft
        return bool(
            s.hard_dirty
            or s.msgs_now
            or s.msgs_after
            or s.events
            or s.snapshot_ops
            or s.log.has_pending_append()
            or (s.commit > s.handed_out and s.log.persisted_last_index > s.handed_out)
            or reported is None
            or reported.role is not s.role
            or reported.term != s.term
            or reported.leader_id != s.leader_id
        )

    def ready(self) -> Ready:
        """Collect the pending work. Call ``advance`` with it before the next ``ready``;
        inputs may keep arriving in between (they go into the next Ready)."""
        if self._outstanding is not None:
            raise LocalProtocolError("ready() called again before advance()")
        s = self._s
        if s.replication_dirty and s.role is Role.LEADER:
            replication.flush(s)
        if s.pending_reads:
            read_index.settle(s)
        soft: SoftState | None = s.soft_state()
        if soft == s.reported_soft:
            soft = None
        else:
            s.reported_soft = soft
        hard = s.hard_state() if s.hard_dirty else None
        s.hard_dirty = False
        ready = Ready(
            soft_state=soft,
            hard_state=hard,
            snapshot_ops=tuple(s.snapshot_ops),
            append=s.log.take_append(),
            messages_now=tuple(s.msgs_now),
            messages_after_persist=tuple(s.msgs_after),
            committed=self._take_committed(),
            events=tuple(s.events),
        )
        s.snapshot_ops.clear()
        s.msgs_now.clear()
        s.msgs_after.clear()
        s.events.clear()
        self._outstanding = ready
        return ready

    def _take_committed(self) -> CommittedEntries | None:
        """Committed entries not handed out yet, and only those durable here: a follower may
        learn that an entry is committed before its own write of it completes (the write is
        in flight on the storage thread); it applies it in a later Ready."""
        s = self._s
        high = min(s.commit, s.log.persisted_last_index)
        low = s.handed_out + 1
        if high < low:
            return None
        entries = s.log.entries(low, high + 1, s.cfg.max_committed_bytes_per_ready)
        s.handed_out = low + len(entries) - 1
        return CommittedEntries(low, tuple(entries))

    def advance(self, ready: Ready) -> None:
        """``ready`` has been carried out completely: its writes are durable, its messages
        sent and its committed entries applied (or being applied, reported through
        ``applied``). The synchronous form of ``dispatched`` followed by ``persisted``."""
        self.dispatched(ready)
        if ready.needs_persist:
            self.persisted(ready)

    def dispatched(self, ready: Ready) -> None:
        """``ready`` is taken: its ``messages_now`` are sent, its writes queued (they become
        durable in the order the Readies were handed out) and its ``messages_after_persist``
        held until they are. The next ``ready()`` may be taken now; until ``persisted`` the
        entries of this one do not count as durable (a leader does not count its own copy,
        a follower does not apply them)."""
        if ready is not self._outstanding:
            raise LocalProtocolError("advance() must be given the last Ready handed out")
        self._outstanding = None
        if ready.needs_persist:
            self._persisting.append(ready)

    def persisted(self, ready: Ready) -> None:
        """The writes of ``ready`` (hard state, snapshot operations, append) are durable.
        Readies are persisted in the order they were dispatched (one storage thread, one
        WAL); anything else is a driver bug and raises ``LocalProtocolError``."""
        if not self._persisting or self._persisting[0] is not ready:
            raise LocalProtocolError("persisted() must be given the oldest dispatched write")
        self._persisting.popleft()
        s = self._s
        hard = ready.hard_state
        if s.campaign_unsent and hard is not None and hard.current_term == s.term:
            election.votes_sent(s)  # this Ready carried the campaign's term and vote
        for op in ready.snapshot_ops:
            if isinstance(op, SnapshotInstall):
                s.log.snapshot_persisted(op.index, op.term)
        if ready.append is not None:
            s.log.stable_to(ready.append)
            if s.role is Role.LEADER:
                maybe_commit(s)  # this leader's own copy is durable now
