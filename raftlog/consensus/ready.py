"""What the core asks its driver to do: ``Ready`` and the records it is made of.

A ``Ready`` is handed out by ``RaftCore.ready()`` and must be carried out **in this order**
(the only order that is safe; see ``raftlog.consensus`` for the full contract):

0. ``messages_now`` may be sent at once, even before anything below is durable: they are the
   leader's AppendEntries/InstallSnapshot requests (raft-rs style; the leader counts its own
   copy of an entry only after step 3 and ``advance``).
1. ``hard_state``: save it (durable on return).
2. ``snapshot_ops`` in order: a :class:`SnapshotChunkWrite` is ``snapshots.begin(index, term,
   total_size)`` then ``snapshots.write_chunk(offset, data)``; a :class:`SnapshotInstall` is
   ``snapshots.finish()`` (only if ``finish_receive``), then ``log.compact(index, term)``, then
   restoring the state machine from the installed snapshot.
3. ``append``: ``log.append(first_index, entries)`` (truncates everything from
   ``first_index`` first; durable on return).
4. ``messages_after_persist``: votes, AppendEntries/InstallSnapshot replies and a candidate's
   RequestVotes -- they promise that 1-3 are durable.
5. ``committed``: apply these entries to the state machine in order (CONFIG and CHECKPOINT
   entries are part of the sequence; the state machine skips them), then report progress with
   ``RaftCore.applied(index)``.
6. ``events`` and ``soft_state``: react (answer clients, drop pipelines, reconnect peers).
7. ``RaftCore.advance(ready)``.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import TypeAlias

from raftlog.entry import LogEntry
from raftlog.rpc.messages import ConfigPayload, PeerRequest, PeerResponse
from raftlog.storage.base import HardState


class Role(Enum):
    """A peer's role. CLIENT: not a member of its configuration (§12.5) -- it replicates and
    votes but never campaigns."""

    FOLLOWER = "follower"
    CANDIDATE = "candidate"
    LEADER = "leader"
    CLIENT = "client"


@dataclass(frozen=True, slots=True)
class SoftState:
    """Volatile state the driver reacts to; reported whenever any field changes.

    On losing LEADER the driver fails pending client requests with "not leader"
    (``leader_id`` names the new leader when known), cancels outstanding peer RPCs and drops
    RequestEntries pipelines.
    """

    role: Role
    leader_id: str | None
    term: int


@dataclass(frozen=True, slots=True)
class SendRequest:
    """Send ``message`` to peer ``to`` as a *new* request with a *new* msgid. The transport
    never retransmits by itself; a response is handed back with
    ``RaftCore.step_response(to, message, response)`` -- the very same ``message`` object."""

    to: str
    message: PeerRequest


@dataclass(frozen=True, slots=True)
class SendReply:
    """Answer the request that arrived with ``step_request(token, ...)``."""

    token: object
    message: PeerResponse


Outbound: TypeAlias = SendRequest | SendReply


@dataclass(frozen=True, slots=True)
class LogAppend:
    """``log.append(first_index, entries)``: drop every entry at or after ``first_index``,
    then write ``entries`` there (``entries`` may be empty: a pure truncation)."""

    first_index: int
    entries: tuple[LogEntry, ...]


@dataclass(frozen=True, slots=True)
class CommittedEntries:
    """Committed entries ``first_index ..`` to apply in order. Never beyond what is durable
    locally once steps 1-3 of the same Ready are done."""

    first_index: int
    entries: tuple[LogEntry, ...]

    @property
    def last_index(self) -> int:
        """The index of the last entry in this batch."""
        return self.first_index + len(self.entries) - 1


@dataclass(frozen=True, slots=True)
class SnapshotChunkWrite:
    """Write one received InstallSnapshot chunk into the pending snapshot
    ``(index, term, total_size)`` (``begin`` then ``write_chunk``)."""

    index: int
    term: int
    total_size: int
    offset: int
    data: bytes


@dataclass(frozen=True, slots=True)
class SnapshotInstall:
    """Make snapshot ``(index, term)`` current: ``snapshots.finish()`` if ``finish_receive``
    (it is already installed otherwise, e.g. after a crash right after ``finish``), then
    ``log.compact(index, term)``, then restore the state machine from it and call
    ``RaftCore.applied(index)``."""

    index: int
    term: int
    finish_receive: bool


SnapshotOp: TypeAlias = SnapshotChunkWrite | SnapshotInstall


# --- events --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ConfigChanged:
    """The configuration in effect changed (an entry was appended or rolled back, or a
    snapshot made it uncertain). Reconnect peers to ``config.all_peers()``. ``known`` False:
    the configuration at the installed snapshot is unknown (the wire carries none); the peer
    does not campaign until a CONFIG entry arrives, and accepts RequestVotes from any
    sender."""

    config: ConfigPayload
    index: int
    known: bool


@dataclass(frozen=True, slots=True)
class ConfigChangeCompleted:
    """This leader saw the joint entry at ``joint_index`` committed and appended C(new) at
    ``final_index``: answer pending ConfigUpdate requests for ``joint_index`` with
    ``[1, joint_index]`` (§10.4 step 4)."""

    joint_index: int
    final_index: int


@dataclass(frozen=True, slots=True)
class SteppedDown:
    """This peer stopped leading. ``reason``: ``"higher_term"``, ``"check_quorum"`` or
    ``"removed"`` (C(new) without this peer committed)."""

    term: int
    reason: str


@dataclass(frozen=True, slots=True)
class TruncationRefused:
    """A leader asked this follower to overwrite entry ``index`` at or below its commit index
    ``commit_index``; the reference exits here, this core refuses and answers failure."""

    leader_id: str
    term: int
    index: int
    commit_index: int


@dataclass(frozen=True, slots=True)
class BadConfigEntry:
    """A CONFIG entry at ``index`` could not be decoded; it is kept in the log (it is
    replicated state) but not adopted."""

    index: int
    reason: str


@dataclass(frozen=True, slots=True)
class MessageDropped:
    """A peer message carried a term or index above the ceiling of ``raftlog.bounds``
    (``reason``: ``term_out_of_range`` / ``index_out_of_range``, or ``term_above_ceiling`` for
    a term this peer could encode but will not adopt); it was ignored without a
    reply and nothing was adopted. ``sender`` is the peer id it named (requests) or the peer
    it answered for (responses)."""

    reason: str
    sender: str
    message_type: str


@dataclass(frozen=True, slots=True)
class CampaignRefused:
    """This peer's term is ``MAX_TERM``: it cannot start another election without a term it
    could not encode. It keeps following (and voting in) its current term; the operator
    recovers with ``raftlog-tool reset-term`` (docs/peer-service.md)."""

    term: int
    reason: str


@dataclass(frozen=True, slots=True)
class RemovedFromCluster:
    """A committed configuration (the entry at ``index``) no longer has this peer, which was a
    voter before: it stops campaigning (it is a CLIENT now); the peer service exits 0
    unless told to stay as a non-voting follower. Emitted once per core."""

    index: int


@dataclass(frozen=True, slots=True)
class FollowerLostEntries:
    """Follower ``peer_id`` rejected AppendEntries with a log that ends at ``last_index``,
    below ``acknowledged``, the index it had already acknowledged: it lost entries it had
    made durable (a wiped or replaced data directory, a restored old backup). The leader
    resends from the follower's real end (a snapshot when that is compacted), as the
    reference leader does; the operator should know, because a peer that lost its state may
    also have lost its vote (docs/operations.md, "One peer lost its disk")."""

    peer_id: str
    acknowledged: int
    last_index: int


@dataclass(frozen=True, slots=True)
class ReadIndexReady:
    """The linearizable read ``context`` (given to ``RaftCore.read_index``) may be answered
    once this peer's state machine has applied ``index``: this leader confirmed, after the
    read arrived, that it still leads, and ``index`` covers every write acknowledged before."""

    context: object
    index: int


@dataclass(frozen=True, slots=True)
class ReadIndexFailed:
    """The linearizable read ``context`` cannot be confirmed: this peer stopped leading (or
    its term moved) before a quorum confirmed it. Answer "not leader", naming
    ``leader_id`` when known; never serve it from this peer's possibly stale state."""

    context: object
    leader_id: str | None


Event: TypeAlias = (
    ConfigChanged
    | ConfigChangeCompleted
    | SteppedDown
    | TruncationRefused
    | BadConfigEntry
    | MessageDropped
    | CampaignRefused
    | RemovedFromCluster
    | FollowerLostEntries
    | ReadIndexReady
    | ReadIndexFailed
)


@dataclass(frozen=True, slots=True)
class Ready:
    """One batch of work for the driver; carry it out in the order of the module docstring."""

    soft_state: SoftState | None
    hard_state: HardState | None
    snapshot_ops: tuple[SnapshotOp, ...]
    append: LogAppend | None
    messages_now: tuple[Outbound, ...]
    messages_after_persist: tuple[Outbound, ...]
    committed: CommittedEntries | None
    events: tuple[Event, ...]

    @property
    def needs_persist(self) -> bool:
        """Whether steps 1-3 have anything to write (one fsync batch when they do)."""
        return self.hard_state is not None or bool(self.snapshot_ops) or self.append is not None
