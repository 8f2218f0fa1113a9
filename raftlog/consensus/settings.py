"""``CoreConfig``: every tunable of the consensus core, in ticks and bytes.

The core never reads a clock: the driver calls ``RaftCore.tick(n)`` for every ``n * tick_ms`` and
converts the millisecond options of docs/protocol.md §13 with :meth:`CoreConfig.from_millis`.

``bugs`` holds *deliberately broken* behaviours (:class:`Bug`). They exist only so that the
simulator's negative-control tests can prove that the invariant checker fails when a classic
Raft mistake is made. Production code never sets them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from enum import Enum

from raftlog.ids import DEFAULT_REQUEST_ID_ACCEPT_MARGIN_MS, DEFAULT_REQUEST_ID_TTL_MS


class Bug(Enum):
    """Test-only switches that make the core unsafe in one well-known way each."""

    VOTE_NOT_PERSISTED = "vote_not_persisted"
    """Hard state is saved without ``voted_for`` (PySyncObj #202): after a restart the peer
    can vote twice in one term."""

    REPLY_BEFORE_PERSIST = "reply_before_persist"
    """Vote grants and AppendEntries acks leave in ``messages_now``, before the fsync."""

    LEADER_ACK_BEFORE_PERSIST = "leader_ack_before_persist"
    """The leader counts its own unpersisted entries towards the commit quorum."""

    COMMIT_PREVIOUS_TERM_BY_COUNT = "commit_previous_term_by_count"
    """The leader commits an entry of an earlier term by counting replicas (Raft Figure 8)."""

    FOLLOWER_COMMIT_TO_LAST_INDEX = "follower_commit_to_last_index"
    """A follower commits ``min(leaderCommit, lastIndex)`` instead of stopping at the last
    entry the AppendEntries verified (copycat #265)."""

    READ_INDEX_WITHOUT_QUORUM = "read_index_without_quorum"
    """A leader answers linearizable reads from its own commit index without confirming it
    still leads (a stale leader in a minority partition serves old state)."""


def _ticks(ms: int, tick_ms: int) -> int:
    return max(1, math.ceil(ms / tick_ms))


@dataclass(frozen=True, slots=True)
class CoreConfig:
    """Consensus tunables. Defaults are the reference's (§13) for a 10 ms tick."""

    peer_id: str
    election_ticks: tuple[int, int] = (20, 30)
    """Inclusive range of the randomized election timeout (200-300 ms)."""
    first_election_extra_ticks: int = 30
    """Added once to the first timeout after start-up (300 ms)."""
    heartbeat_ticks: int = 7
    """Idle time after which a leader sends an empty AppendEntries (70 ms)."""
    vote_timeout_ticks: int = 5
    """RequestVote retransmission interval (``rpcTimeout``, 50 ms)."""
    append_timeout_ticks: int = 7
    """Empty AppendEntries response timeout (``appendEntriesRpcTimeoutMin``, 70 ms)."""
    append_entries_timeout_ticks: int = 14
    """AppendEntries with entries / InstallSnapshot timeout (``...RpcTimeoutMax``, 140 ms)."""
    max_append_bytes: int = 65536
    """``peerMsgDataSize``: entry bytes per AppendEntries (at least one entry is always
    sent) and the InstallSnapshot chunk size."""
    max_inflight_messages: int = 1
    """AppendEntries that may be unacknowledged per follower whose latest answer carried the
    pipelining mark; every other follower (a reference one) gets 1, stop-and-wait, whatever
    this says (``replication.window``). The peer's default is 4 (``replication_pipeline``);
    1 here keeps the core's own default the reference leader's behaviour."""
    max_inflight_bytes: int = 1 << 20
    """Entry bytes that may be unacknowledged per follower."""
    max_committed_bytes_per_ready: int = 4 << 20
    """Upper bound of ``Ready.committed`` (at least one entry is always handed out)."""
    request_id_ttl_ms: int | None = DEFAULT_REQUEST_ID_TTL_MS
    request_id_accept_margin_ms: int = DEFAULT_REQUEST_ID_ACCEPT_MARGIN_MS
    prevent_spiral_elections: bool = True
    """§12.1: a candidate that has not heard from a majority neither starts a new term nor
    adopts higher terms from vote traffic."""
    leader_stickiness: bool = True
    """Raft paper §6: a follower that heard from a current leader (or a leader that heard
    from a quorum) less than a minimum election timeout ago refuses a higher-term RequestVote
    without adopting its term, so neither a removed or partitioned peer nor a forged message
    can depose a working leader (``election.leader_is_sticky``)."""
    check_quorum: bool = False
    """Extension: a leader that has not heard from a quorum for a whole minimum election
    timeout steps down to follower (invisible on the wire)."""
    bugs: frozenset[Bug] = field(default_factory=frozenset)
    """Test-only deliberately broken behaviours; never set outside negative-control tests."""

    def __post_init__(self) -> None:
        low, high = self.election_ticks
        checks = (
            (bool(self.peer_id), "peer_id must be non-empty"),
            (1 <= low <= high, "election_ticks must satisfy 1 <= min <= max"),
            (self.first_election_extra_ticks >= 0, "first_election_extra_ticks must be >= 0"),
            (self.heartbeat_ticks >= 1, "heartbeat_ticks must be >= 1"),
            (self.vote_timeout_ticks >= 1, "vote_timeout_ticks must be >= 1"),
            (self.append_timeout_ticks >= 1, "append_timeout_ticks must be >= 1"),
            (
                self.append_timeout_ticks <= self.append_entries_timeout_ticks,
                "append_entries_timeout_ticks must be >= append_timeout_ticks",
            ),
            (self.max_append_bytes >= 64, "max_append_bytes must be >= 64"),
            (self.max_inflight_messages >= 1, "max_inflight_messages must be >= 1"),
            (self.max_inflight_bytes >= 1, "max_inflight_bytes must be >= 1"),
            (self.max_committed_bytes_per_ready >= 1, "max_committed_bytes_per_ready >= 1"),
        )
        for ok, message in checks:
            if not ok:
                raise ValueError(message)

    @classmethod
    def from_millis(
        cls,
        peer_id: str,
        *,
        tick_ms: int = 10,
        election_timeout_min: int = 200,
        election_timeout_max: int = 300,
        first_election_extra: int = 300,
        rpc_timeout: int = 50,
        heartbeat_interval: int = 70,
        append_entries_rpc_timeout_min: int = 70,
        append_entries_rpc_timeout_max: int = 140,
        peer_msg_data_size: int = 65536,
        request_id_ttl: int | None = DEFAULT_REQUEST_ID_TTL_MS,
        request_id_ttl_accept_margin: int = DEFAULT_REQUEST_ID_ACCEPT_MARGIN_MS,
        prevent_spiral_elections: bool = True,
        leader_stickiness: bool = True,
        check_quorum: bool = False,
        replication_pipeline: int = 4,
    ) -> CoreConfig:
        """Build a config from the reference's millisecond options (names as in §13);
        every duration is rounded up to whole ticks of ``tick_ms``."""
        if tick_ms < 1:
            raise ValueError("tick_ms must be >= 1")
        return cls(
            peer_id=peer_id,
            election_ticks=(
                _ticks(election_timeout_min, tick_ms),
                _ticks(election_timeout_max, tick_ms),
            ),
            first_election_extra_ticks=math.ceil(first_election_extra / tick_ms),
            heartbeat_ticks=_ticks(heartbeat_interval, tick_ms),
            vote_timeout_ticks=_ticks(rpc_timeout, tick_ms),
            append_timeout_ticks=_ticks(append_entries_rpc_timeout_min, tick_ms),
            append_entries_timeout_ticks=_ticks(append_entries_rpc_timeout_max, tick_ms),
            max_append_bytes=peer_msg_data_size,
            request_id_ttl_ms=request_id_ttl,
            request_id_accept_margin_ms=request_id_ttl_accept_margin,
            prevent_spiral_elections=prevent_spiral_elections,
            leader_stickiness=leader_stickiness,
            check_quorum=check_quorum,
            max_inflight_messages=replication_pipeline,
        )
