"""One frozen, slotted dataclass per ØMQ RAFT message (docs/protocol.md §6-§11).

This is a leaf module shared by the consensus core, the codec and the transports (like etcd's
``raftpb``). What a message *means* lives here; how it is laid out in frames lives in
the codecs (``raftlog.rpc.codec`` and ``request_encoders`` for requests, ``responses`` and
``response_decoders`` for answers). Two things are deliberately *not* fields of these classes:

* frame 1, the request id / peer msgid, which the transport assigns and echoes (except the
  12-byte ``request_id`` of RequestUpdate and ConfigUpdate, which is part of their meaning);
* the cluster ident, which belongs to the cluster, not to a message.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Final, TypeAlias

from raftlog.entry import LogEntry

# --- message type bytes (§5.2) ---------------------------------------------------------------

TYPE_REQUEST_VOTE: Final = b"?"
TYPE_APPEND_ENTRIES: Final = b"+"
TYPE_INSTALL_SNAPSHOT: Final = b"$"
TYPE_REQUEST_CONFIG: Final = b"^"
TYPE_REQUEST_LOG_INFO: Final = b"%"
TYPE_REQUEST_UPDATE: Final = b"="
TYPE_CONFIG_UPDATE: Final = b"&"
TYPE_REQUEST_ENTRIES: Final = b"<"
TYPE_REQUEST_BROADCAST_STATE_URL: Final = b"*"
TYPE_REQUEST_WEBMONITOR_URL: Final = b"W"

PEER_RPC_TYPES: Final = frozenset({TYPE_REQUEST_VOTE, TYPE_APPEND_ENTRIES, TYPE_INSTALL_SNAPSHOT})
"""Types whose frame 1 is a 1-3 byte msgid and which only peers send."""


# --- peers and configurations (§4.2) ---------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Peer:
    """A cluster member: its id and its ROUTER URL (``tcp://<ip literal>:<port>``)."""

    id: str
    url: str


@dataclass(frozen=True, slots=True)
class ConfigPayload:
    """The data of a CONFIG entry: joint C(old,new) when ``old`` is set, else final C(new)."""

    new: tuple[Peer, ...]
    old: tuple[Peer, ...] | None = None

    @property
    def is_joint(self) -> bool:
        """Whether this is a joint configuration (old and new both decide: §6 of the Raft paper)."""
        return self.old is not None

    def all_peers(self) -> tuple[Peer, ...]:
        """Union of old and new, old order first (what RequestConfig answers with)."""
        if self.old is None:
            return self.new
        seen = {p.id for p in self.old}
        return self.old + tuple(p for p in self.new if p.id not in seen)


# --- peer RPCs (§7-§9) -----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RequestVote:
    """``v``: a candidate asks for a vote (Raft §5.2; docs/protocol.md §4)."""
    candidate_id: str
    term: int
    last_log_index: int
    last_log_term: int
    transfer: bool = False
    """raftlog extension (frame 8, ``uint 1``): this campaign was asked for by a leadership
    transfer, so a raftlog follower answers it despite leader stickiness (as etcd's
    transfer context does). A reference peer ignores request frames beyond those it
    defines (docs/protocol.md §5.3), so it sees an ordinary RequestVote."""


@dataclass(frozen=True, slots=True)
class RequestVoteResponse:
    """The answer to ``RequestVote``: the voter's term and whether it granted its vote."""
    term: int
    vote_granted: bool


@dataclass(frozen=True, slots=True)
class AppendEntries:
    """``a``: the leader's replication and heartbeat (Raft §5.3; docs/protocol.md §4)."""
    leader_id: str
    term: int
    prev_log_index: int
    prev_log_term: int
    commit_index: int
    entries: tuple[LogEntry, ...] = ()


@dataclass(frozen=True, slots=True)
class AppendEntriesResponse:
    """``next_index_hint`` is the follower's lastIndex + 1, sent only on failure when its log
    is shorter than prevLogIndex (the reference's frame 4; docs/protocol.md §8, §14.1).

    ``pipelines`` (raftlog extension, successes only): the follower takes pipelined
    AppendEntries -- it never truncates a matching suffix nor exits on a prevLogIndex below
    its commit index. A leader pipelines only to a follower whose latest answer said so, so
    that a reference follower (which never says so) always gets stop-and-wait."""

    term: int
    success: bool
    next_index_hint: int | None = None
    pipelines: bool = False


@dataclass(frozen=True, slots=True)
class InstallSnapshot:
    """``s``: one chunk of the leader's snapshot for a follower too far behind (Raft §7)."""
    leader_id: str
    term: int
    last_included_index: int
    last_included_term: int
    offset: int
    total_size: int
    data: bytes


@dataclass(frozen=True, slots=True)
class InstallSnapshotResponse:
    """``next_offset`` set means "send from this byte offset" (the follower's frame 3)."""

    term: int
    next_offset: int | None = None


# --- client RPCs (§10) -----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RequestConfig:
    """``c``: ask any peer for the cluster configuration and who leads (no arguments)."""


@dataclass(frozen=True, slots=True)
class RequestConfigResponse:
    """The answer to ``RequestConfig``: leader (if known) and the configuration's peers."""
    is_leader: bool
    leader_id: str | None
    peers: tuple[Peer, ...]


@dataclass(frozen=True, slots=True)
class RequestLogInfo:
    """``i``: ask a peer for its log's bounds, commit and applied indexes (no arguments)."""


@dataclass(frozen=True, slots=True)
class RequestLogInfoResponse:
    """The answer to ``RequestLogInfo``: what a client needs to plan reads and see lag."""
    is_leader: bool
    leader_id: str | None
    term: int
    first_index: int
    last_applied: int
    commit_index: int
    last_index: int
    snapshot_size: int
    prune_index: int


@dataclass(frozen=True, slots=True)
class RequestUpdate:
    """``u``: append client data under a request id (a retry reuses it: appended at most
    once)."""
    request_id: bytes
    data: bytes


class UpdateStatus(IntEnum):
    """The four response forms of RequestUpdate (§10.3)."""

    ACCEPTED = 1  # [true]             keep waiting
    DONE = 2  # [true, index]      final success
    NOT_LEADER = 3  # [false, leader|nil]
    EXPIRED = 4  # [false]            request id outside the acceptance window


@dataclass(frozen=True, slots=True)
class RequestUpdateResponse:
    """The answer to ``RequestUpdate``: its status and, once committed, the entry's index."""
    request_id: bytes
    status: UpdateStatus
    index: int | None = None
    leader_id: str | None = None


@dataclass(frozen=True, slots=True)
class ConfigUpdate:
    """``C``: change the cluster's peers (joint consensus, Raft §6)."""
    request_id: bytes
    peers: tuple[Peer, ...]


class ConfigUpdateStatus(IntEnum):
    """Status of a ``ConfigUpdate`` answer, as the reference numbers them."""
    NOT_LEADER = 0
    OK = 1  # accepted (no index) or done (index of the joint entry)
    CONFIG_ERROR = 2
    BUSY = 3
    EXPIRED = 4


@dataclass(frozen=True, slots=True)
class ConfigUpdateErrorInfo:
    """Why a ``ConfigUpdate`` was refused (an error name and message, as the reference sends)."""
    name: str
    message: str


@dataclass(frozen=True, slots=True)
class ConfigUpdateResponse:
    """The answer to ``ConfigUpdate``: status, the joint entry's index or the error."""
    request_id: bytes
    status: ConfigUpdateStatus
    index: int | None = None
    leader_id: str | None = None
    error: ConfigUpdateErrorInfo | None = None


@dataclass(frozen=True, slots=True)
class RequestEntries:
    """``count``: None = no limit; 0 in a follow-up = stop. ``snapshot_offset``: frame 6."""

    prev_index: int
    count: int | None = None
    snapshot_offset: int | None = None
    any_peer: bool = False
    """raftlog extension (frame 7, docs/protocol.md §10.5): committed entries from whichever
    peer is asked, a follower included, up to that peer's own applied index. The reference
    ignores frames beyond 6, so its followers still answer "not leader"."""
    min_index: int = 0
    """raftlog extension (frame 8, issue #29): the serving peer starts the stream only once
    it has applied this index (read-your-writes; a follower that cannot within its read wait
    answers "not leader"). 0: no minimum."""
    linearizable: bool = False
    """raftlog extension (frame 9): the stream starts only after ReadIndex -- the leader's
    own, or on a follower (``any_peer``) the leader's read index asked with ``RI``."""


class EntriesStatus(IntEnum):
    """Status of a ``RequestEntries`` batch: not the leader, the last batch, or more to come."""
    NOT_LEADER = 0
    LAST = 1
    MORE = 2
    SNAPSHOT = 3


@dataclass(frozen=True, slots=True)
class SnapshotChunk:
    """One chunk of a snapshot streamed to a ``RequestEntries`` client that starts below the log."""
    offset: int
    total_size: int
    term: int
    index: int
    data: bytes


@dataclass(frozen=True, slots=True)
class RequestEntriesResponse:
    """Status 0: ``leader_id``. Status 1/2: ``last_index`` and ``entries`` (ending there).
    Status 3: ``snapshot``."""

    status: EntriesStatus
    leader_id: str | None = None
    last_index: int | None = None
    entries: tuple[LogEntry, ...] = ()
    snapshot: SnapshotChunk | None = None
    raw_entries: Sequence[bytes] = ()
    """The server's fast path: entries as stored (serialized, checksum-verified), sent
    without decoding and re-encoding each one; encoded after ``entries``. Never decoded
    into (decoders fill ``entries``)."""


@dataclass(frozen=True, slots=True)
class RequestBroadcastStateUrl:
    """``B``: ask for the URL of the leader's PUB socket (no arguments)."""


@dataclass(frozen=True, slots=True)
class RequestBroadcastStateUrlResponse:
    """The answer to ``RequestBroadcastStateUrl``: the PUB URL to subscribe to."""
    url: str


@dataclass(frozen=True, slots=True)
class ClientDispatch:
    """Any other message type (>= 1 byte), forwarded to the state machine with its frames."""

    type: bytes
    args: tuple[bytes, ...] = field(default=())


@dataclass(frozen=True, slots=True)
class ClientDispatchResponse:
    """The raw frames answering a state-machine request (``ClientDispatch``)."""
    frames: tuple[bytes, ...] = field(default=())


# --- BroadcastStateMachine PUB (§11.2) -------------------------------------------------------


@dataclass(frozen=True, slots=True)
class StateBroadcast:
    """``last_index``: index of the last entry carried, or lastApplied for a heartbeat."""

    term: int
    last_index: int
    entries: tuple[LogEntry, ...] = ()


# --- unions ----------------------------------------------------------------------------------

PeerRequest: TypeAlias = RequestVote | AppendEntries | InstallSnapshot
PeerResponse: TypeAlias = RequestVoteResponse | AppendEntriesResponse | InstallSnapshotResponse
ClientRequest: TypeAlias = (
    RequestConfig
    | RequestLogInfo
    | RequestUpdate
    | ConfigUpdate
    | RequestEntries
    | RequestBroadcastStateUrl
    | ClientDispatch
)
ClientResponse: TypeAlias = (
    RequestConfigResponse
    | RequestLogInfoResponse
    | RequestUpdateResponse
    | ConfigUpdateResponse
    | RequestEntriesResponse
    | RequestBroadcastStateUrlResponse
    | ClientDispatchResponse
)
Request: TypeAlias = PeerRequest | ClientRequest
Response: TypeAlias = PeerResponse | ClientResponse
