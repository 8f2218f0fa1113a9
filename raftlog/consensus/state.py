"""``CoreState``: everything one Raft peer knows, and the transitions every role shares.

The role modules (``election``, ``follower``, ``replication``, ``leader``, ``proposals``) are
functions over this object, in the style of etcd's ``stepLeader(r, m)``; ``RaftCore`` is the
public facade. Only this module and the role modules touch these fields.

Persistence discipline: any change to ``term``, ``voted_for`` or the configuration sets
``hard_dirty``; the next ``Ready`` carries the hard state, and every message that depends on it
goes to ``msgs_after`` (sent only after the driver persisted it).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from random import Random

from raftlog.bounds import MAX_TERM
from raftlog.consensus.membership import ConfigHistory, Membership, recover_history
from raftlog.consensus.progress import Progress
from raftlog.consensus.raft_log import RaftLog
from raftlog.consensus.ready import (
    ConfigChanged,
    Event,
    Outbound,
    RemovedFromCluster,
    Role,
    SendReply,
    SendRequest,
    SnapshotInstall,
    SnapshotOp,
    SoftState,
    SteppedDown,
)
from raftlog.consensus.settings import Bug, CoreConfig
from raftlog.rpc.messages import ConfigPayload, Peer, PeerRequest, PeerResponse
from raftlog.storage.base import HardState, LogStore, SnapshotStore


@dataclass(slots=True)
class PendingRead:
    """A linearizable read (``read_index``) waiting for its index and its confirmation."""

    context: object
    """The driver's handle (answered back in the event)."""
    seq: int
    """Requests sent after this read carry a ``read_seq`` of at least this value."""
    term: int
    """The leader's term when the read arrived; a change fails the read."""
    index: int | None
    """The read index: None until this leader has committed an entry of its term."""


class CoreState:
    """Mutable state of one peer; see the module docstring."""

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
        self.cfg = config
        self.id = config.peer_id
        self.rng = rng
        self.new_request_id = new_request_id
        self.snapshots = snapshots
        self.log = RaftLog(log)
        self.term = hard_state.current_term
        self.voted_for = hard_state.voted_for
        self.applied = hard_state.last_applied
        _check_durable_state(log, hard_state)
        self.history: ConfigHistory = recover_history(
            log, hard_state, seed_config, hard_state.last_applied
        )
        self.commit = max(self.applied, log.snapshot_index)
        self.handed_out = self.commit
        """Last index handed to the driver in ``Ready.committed`` (or covered by a snapshot)."""
        self.now = 0
        self.role = self.member_role()
        self.leader_id: str | None = None
        self.leader_contact: int | None = None
        """Tick of the last AppendEntries/InstallSnapshot accepted from ``leader_id`` (moved
        to the end of the tick span in which it was read: ``RaftCore.tick``)."""
        self.leader_heard = False
        """``leader_contact`` happened since the last tick (``heard_leader_this_span``)."""
        self.election_elapsed = 0
        self.election_timeout = self.random_timeout() + config.first_election_extra_ticks
        self.votes: dict[str, bool] = {}
        """Candidate: answers received this term (granted or not), own vote included."""
        self.vote_sent_at: dict[str, int] = {}
        self.campaign_unsent = False
        self.campaign_transfer = False
        """Candidate: this term's campaign is a leadership transfer's (``RequestVote.transfer``)."""
        self.drained = False
        """Maintenance drain (``raftlog-admin drain``): this peer never campaigns."""
        """Candidate: this term's RequestVotes wait for the persist of its term and vote
        (``election.votes_sent`` starts the timer when they leave)."""
        self.votes_left = False
        """Candidate: its RequestVotes left since the last tick (``RaftCore.tick``)."""
        self.progress: dict[str, Progress] = {}
        self.departing: dict[str, Peer] = {}
        """Leader: peers a final configuration removed that are still being sent entries
        until they acknowledge its commit, so they learn of their removal (``leader``)."""
        self.was_voter = self.history.involves(self.id) or any(
            peer.id == self.id for peer in seed_config.all_peers()
        )
        """This peer was (or was configured as) a voter: losing that is a removal."""
        self.removed_reported = False
        self.pending_change: tuple[bytes, int] | None = None
        """Leader: (request id, joint index) of the ConfigUpdate this leader started."""
        self.quorum_elapsed = 0
        self.read_seq = 0
        """Linearizable reads queued so far (``read_index``); never reset."""
        self.pending_reads: deque[PendingRead] = deque()
        self.read_sent: dict[str, int] = {}
        """Per follower: ``read_seq`` when a request was last sent to it."""
        self.read_acks: dict[str, int] = {}
        """Per follower: highest ``read_seq`` of a request it answered in this term."""
        self.receiving: tuple[int, int, int] | None = None
        """Follower: the (index, term, size) of the snapshot being received."""
        self.received = 0
        self.msgs_now: list[Outbound] = []
        self.msgs_after: list[Outbound] = []
        self.events: list[Event] = []
        self.snapshot_ops: list[SnapshotOp] = []
        # A never-saved configuration is written out at once: afterwards "no saved
        # configuration" can only mean "unknown after a snapshot" (see ``membership``).
        self.hard_dirty = hard_state.config is None and self.history.current.known
        self.replication_dirty = False
        self.reported_soft: SoftState | None = None
        self._recover_snapshot(log, snapshots)
        self._check_removed()  # a removed peer that restarts says so again

    def _recover_snapshot(self, log: LogStore, snapshots: SnapshotStore) -> None:
        """A crash between installing a snapshot and restoring the state machine (or
        compacting the log) is finished now: the first Ready re-issues the install."""
        meta = snapshots.meta()
        if meta is None or meta.index <= self.applied:
            if self.applied < log.snapshot_index:
                raise ValueError(
                    f"log compacted to {log.snapshot_index} but last_applied is {self.applied} "
                    "and no snapshot covers the gap"
                )
            return
        if meta.index < log.snapshot_index:
            raise ValueError(
                f"snapshot {meta.index} is older than the log's snapshot {log.snapshot_index}"
            )
        self.install_snapshot(meta.index, meta.term, finish_receive=False)

    # -- derived facts ----------------------------------------------------------------
    @property
    def membership(self) -> Membership:
        """The configuration in force."""
        return self.history.current

    def member_role(self) -> Role:
        """FOLLOWER when this peer may take part in elections, else CLIENT (§12.5)."""
        return Role.FOLLOWER if self.history.involves(self.id) else Role.CLIENT

    def can_campaign(self) -> bool:
        """Votes are always counted under the newest configuration (``vote_result``); a peer
        outside it may still campaign while it could be rolled back to one that has it."""
        return (
            not self.drained and self.history.current.known and self.history.involves(self.id)
        )

    def has_bug(self, bug: Bug) -> bool:
        """Whether the simulator's negative controls switched on ``bug`` (never in production)."""
        return bug in self.cfg.bugs

    def random_timeout(self) -> int:
        """A fresh randomized election timeout in ticks (Raft §5.2: avoids split votes)."""
        low, high = self.cfg.election_ticks
        return self.rng.randint(low, high)

    def soft_state(self) -> SoftState:
        """Role, leader and term: what the driver reacts to when it changes."""
        return SoftState(self.role, self.leader_id, self.term)

    def hard_state(self) -> HardState:
        """What must be durable before answering (term, vote, configuration)."""
        current = self.history.current
        voted_for = None if self.has_bug(Bug.VOTE_NOT_PERSISTED) else self.voted_for
        return HardState(
            current_term=self.term,
            voted_for=voted_for,
            config=current.payload if current.known else None,
            config_index=current.index,
            last_applied=self.applied,
        )

    # -- outbox -----------------------------------------------------------------------
    def send(self, to: str, message: PeerRequest) -> None:
        """A leader request; may leave before this peer's own persist."""
        self.msgs_now.append(SendRequest(to, message))

    def send_after_persist(self, to: str, message: PeerRequest) -> None:
        """A request that depends on the term/vote being durable (RequestVote)."""
        self.msgs_after.append(SendRequest(to, message))

    def reply(self, token: object, message: PeerResponse) -> None:
        """Every reply waits for the persist of the Ready it is in (§7: "persists this
        before replying"; AppendEntries acks promise durable entries)."""
        target = self.msgs_now if self.has_bug(Bug.REPLY_BEFORE_PERSIST) else self.msgs_after
        target.append(SendReply(token, message))

    # -- transitions shared by every role ---------------------------------------------
    def heard_leader_this_span(self) -> bool:
        """Did this follower accept a message from its leader since the last tick? Resets
        the answer for the next span (``RaftCore.tick``)."""
        heard, self.leader_heard = self.leader_heard, False
        return heard and self.role is Role.FOLLOWER and self.leader_id is not None

    def reset_election_timer(self) -> None:
        """Start a new randomized election timeout (heard from a leader, or voted)."""
        self.election_elapsed = 0
        self.election_timeout = self.random_timeout()

    def adopt_term(self, term: int) -> None:
        """Move to a higher term: the vote is cleared (never on a same-term change). Terms
        above ``MAX_TERM`` never get here (``RaftCore.step_*`` drop them); adopting one would
        be a bug that must not reach the disk."""
        if term > MAX_TERM:
            raise AssertionError(f"term {term} above MAX_TERM reached adopt_term")
        if term > self.term:
            self.term = term
            self.voted_for = None
            self.hard_dirty = True

    def become_follower(
        self, term: int, leader_id: str | None, reason: str = "higher_term"
    ) -> None:
        """Follow ``leader_id`` (None: unknown) in ``term`` (>= the current term)."""
        if self.role is Role.LEADER:
            self.events.append(SteppedDown(self.term, reason))
            self.progress = {}
            self.departing = {}
            self.pending_change = None
        self.adopt_term(term)
        self.role = self.member_role()
        self.leader_id = leader_id
        self.votes = {}
        self.vote_sent_at = {}
        self.reset_election_timer()

    def config_changed(self) -> None:
        """The configuration in effect changed: persist it, tell the driver, fix the role."""
        current = self.history.current
        self.hard_dirty = True
        self.events.append(ConfigChanged(current.payload, current.index, current.known))
        if self.role in (Role.FOLLOWER, Role.CLIENT):
            role = self.member_role()
            if role is not self.role:
                self.role = role
                self.reset_election_timer()

    def commit_to(self, index: int) -> None:
        """Advance the commit index; configuration changes it completes take effect."""
        self.commit = index
        self.history.commit_to(index)
        self._check_removed()

    def _check_removed(self) -> None:
        """Once a *committed* configuration leaves this former voter out (and no uncommitted
        one brings it back), it is removed for good: stop campaigning, say so once."""
        if self.history.involves(self.id):
            self.was_voter = True
            return
        current = self.history.current
        if not self.was_voter or self.removed_reported or not current.known:
            return
        if current.index > self.commit:
            return
        self.removed_reported = True
        self.events.append(RemovedFromCluster(current.index))
        if self.role in (Role.FOLLOWER, Role.CANDIDATE):
            self.role = Role.CLIENT
            self.votes = {}
            self.vote_sent_at = {}

    def install_snapshot(self, index: int, term: int, *, finish_receive: bool) -> None:
        """Adopt snapshot ``(index, term)`` as the base of the log (§12.6)."""
        kept = self.log.install_snapshot(index, term)
        self.snapshot_ops.append(SnapshotInstall(index, term, finish_receive))
        if index > self.commit:
            self.commit_to(index)
        self.handed_out = max(self.handed_out, index)
        if not kept:
            self.history.reset_unknown(index)
            self.config_changed()


def _check_durable_state(log: LogStore, hard_state: HardState) -> None:
    """The start-up sanity checks of docs/protocol.md §12.3 that matter to the core, plus the
    term ceiling (``raftlog.bounds``; the peer service refuses such a directory earlier, with
    its own error and exit code 4)."""
    if hard_state.current_term > MAX_TERM:
        raise ValueError(
            f"current term {hard_state.current_term} is above the ceiling {MAX_TERM} "
            "(repair: raftlog-tool reset-term)"
        )
    if hard_state.last_applied > log.last_index:
        raise ValueError(
            f"last_applied {hard_state.last_applied} is beyond the log's last index "
            f"{log.last_index}"
        )
    last_term = log.term_at(log.last_index)
    if last_term is not None and last_term > hard_state.current_term:
        raise ValueError(
            f"the log's last term {last_term} is above the current term {hard_state.current_term}"
        )
