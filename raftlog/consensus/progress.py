"""``Progress``: a leader's bookkeeping for one follower (only ``replication`` mutates it).

States (like etcd's tracker):

* PROBE -- one request in flight at a time until the follower's log position is confirmed
  (plus heartbeats with the same prevLogIndex); ``next`` stays at the probed position.
  Entered after election, after a rejection (then one entry per probe, like the reference)
  and after a response timeout (then a full batch).
* REPLICATE -- pipelined AppendEntries, bounded by ``max_inflight_messages`` and
  ``max_inflight_bytes``; ``next`` moves optimistically as batches are sent.
* SNAPSHOT -- InstallSnapshot chunks, strictly one at a time (§9).

Invariants: ``match`` never decreases; ``match < next``; every in-flight record belongs to the
current *generation*: abandoning the pipeline (timeout, rejection) clears ``inflight``, and a
response whose request is no longer recorded is ignored -- except a success, which is true
whenever it arrives (the follower held those entries in this term and never loses them), so it
may still raise ``match``.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from enum import Enum

from raftlog.rpc.messages import AppendEntries, InstallSnapshot
from raftlog.storage.base import SnapshotMeta

MAX_BACKOFF = 8


class ProgressState(Enum):
    """How the leader replicates to one peer: probing for the match, streaming, or sending a
    snapshot."""
    PROBE = "probe"
    REPLICATE = "replicate"
    SNAPSHOT = "snapshot"


@dataclass(slots=True)
class Inflight:
    """One request this leader is waiting on."""

    request: AppendEntries | InstallSnapshot
    last_index: int
    """For AppendEntries: prevLogIndex + number of entries."""
    size: int
    """Entry bytes carried (counted against ``max_inflight_bytes``)."""
    sent_at: int
    timeout: int
    read_seq: int = 0
    """The newest linearizable read when this request was first sent (``read_index``)."""


class Progress:
    """Replication state of one follower (see module docstring)."""

    __slots__ = (
        "backoff",
        "heard_at",
        "inflight",
        "inflight_bytes",
        "last_sent_at",
        "match",
        "next",
        "peer_id",
        "pipelines",
        "probe_one_entry",
        "recent_active",
        "sent_commit",
        "snapshot",
        "snapshot_offset",
        "state",
    )

    def __init__(self, peer_id: str, next_index: int, now: int) -> None:
        self.peer_id = peer_id
        self.match = 0
        self.next = next_index
        self.state = ProgressState.PROBE
        self.inflight: deque[Inflight] = deque()
        self.inflight_bytes = 0
        self.last_sent_at = now
        self.probe_one_entry = False
        self.sent_commit = 0
        self.recent_active = False
        self.heard_at: int | None = None
        """Tick of this follower's last answer in the current term (or of its vote): the
        leader's side of leader stickiness (``election.leader_is_sticky``)."""
        self.pipelines = False
        """Whether this follower's latest AppendEntries answer carried the pipelining mark
        (``AppendEntriesResponse.pipelines``): only then may more than one request be in
        flight to it (``replication.window``)."""
        self.snapshot: SnapshotMeta | None = None
        self.snapshot_offset = 0
        self.backoff = 1
        """Multiplier of the response timeouts: doubled by every timeout (up to
        ``MAX_BACKOFF``), reset by every answer -- a slow link is not flooded with
        retransmissions whose answers would all arrive too late."""

    def record(self, sent: Inflight) -> None:
        """Remember a message in flight (the pipeline's limits count it until answered)."""
        self.inflight.append(sent)
        self.inflight_bytes += sent.size
        self.last_sent_at = sent.sent_at

    def find(self, request: object) -> Inflight | None:
        """The in-flight record of ``request`` (by identity), None when it was abandoned."""
        for sent in self.inflight:
            if sent.request is request:
                return sent
        return None

    def settle_through(self, sent: Inflight) -> None:
        """``sent`` was answered: it and everything sent before it are no longer in flight."""
        inflight = self.inflight
        while inflight:
            oldest = inflight.popleft()
            self.inflight_bytes -= oldest.size
            if oldest is sent:
                return

    def keep_newest(self) -> None:
        """Forget every in-flight request but the newest (the follower stopped taking
        pipelined requests: ``replication._on_timeout``). Answers to the others still count
        as answers to abandoned requests."""
        if len(self.inflight) > 1:
            self.settle_through(self.inflight[-2])

    def abandon(self) -> None:
        """Start a new generation: forget every in-flight request."""
        self.inflight.clear()
        self.inflight_bytes = 0

    def become_probe(self, next_index: int, one_entry: bool) -> None:
        """Find the match again from ``next_index``, one message at a time (``one_entry``: send only
        one entry)."""
        self.abandon()
        self.state = ProgressState.PROBE
        self.next = max(next_index, self.match + 1)
        self.probe_one_entry = one_entry

    def lost_entries(self, last_index: int) -> None:
        """The follower's log now ends at ``last_index``, below ``match``: it lost entries it
        had acknowledged. ``match`` goes back so that probing can reach its real end (the
        commit index never decreases, so nothing committed is undone here)."""
        self.match = min(self.match, last_index)

    def become_replicate(self) -> None:
        """The match is known: stream entries, pipelined up to the in-flight limits."""
        self.state = ProgressState.REPLICATE
        self.probe_one_entry = False
        self.next = max(self.next, self.match + 1)

    def become_snapshot(self, meta: SnapshotMeta) -> None:
        """The peer needs entries that are compacted away: send it the snapshot ``meta``."""
        self.abandon()
        self.state = ProgressState.SNAPSHOT
        self.snapshot = meta
        self.snapshot_offset = 0

    def acknowledge(self, last_index: int) -> bool:
        """The follower holds everything up to ``last_index``; True when ``match`` grew."""
        self.recent_active = True
        if last_index > self.match:
            self.match = last_index
            if self.next <= last_index:
                self.next = last_index + 1
            return True
        return False

    def pipeline_full(self, max_messages: int, max_bytes: int) -> bool:
        """Whether another message would exceed the in-flight limits (messages or bytes)."""
        return len(self.inflight) >= max_messages or self.inflight_bytes >= max_bytes

    def __repr__(self) -> str:
        return (
            f"Progress({self.peer_id} {self.state.value} match={self.match} next={self.next} "
            f"inflight={len(self.inflight)})"
        )
