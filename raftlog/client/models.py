"""Small value types returned by the client, and its timing defaults (docs/protocol.md §13)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, TypeAlias

from raftlog.entry import LogEntry
from raftlog.options import RaftOptions
from raftlog.rpc.messages import Peer, SnapshotChunk

DEFAULT_TIMEOUT: Final = 10.0
"""Seconds a whole call (all retries included) may take before ``ClusterUnavailableError``."""
RESPONSE_TIMEOUT: Final = 0.5
"""Seconds of silence from one peer before the next peer is tried (reference: 500 ms)."""
ELECTION_GRACE: Final = 0.3
"""Seconds to wait before retrying when no peer knows a leader (reference: 300 ms)."""
REFUSED_TIMEOUT: Final = 1.0
"""Seconds every peer may refuse connections before a call gives up (issue #13: a cluster
that is down must be reported within 2 s, not after the whole ``DEFAULT_TIMEOUT``)."""
MAX_ENTRY_DATA_SIZE: Final = RaftOptions().max_log_entry_data_size
"""The peers' default ``max_log_entry_data_size``: larger updates are refused client-side."""
BROADCAST_TIMEOUT: Final = 1.0
"""Seconds without any StateBroadcast before a subscriber declares the leader lost (§11.2)."""
MIN_BROADCAST_TIMEOUT: Final = 0.1
MAX_CLIENT_REQUEST_ID: Final = (1 << 32) - 1
"""Non-update RPC ids count 1 .. 2^32-1 and wrap to 1 (§5.1)."""


@dataclass(frozen=True, slots=True)
class IndexedEntry:
    """A log entry together with its log index (the index is implied on the wire, §4.1)."""

    index: int
    entry: LogEntry


StreamItem: TypeAlias = IndexedEntry | SnapshotChunk
"""What ``request_entries`` yields: entries, and snapshot chunks when the log was compacted."""


@dataclass(frozen=True, slots=True)
class ClusterInfo:
    """A RequestConfig answer: the responder's view of the cluster (§10.1)."""

    leader_id: str | None
    """The leader's peer id (the responder's own id when ``is_leader``)."""
    peers: tuple[Peer, ...]
    """The configuration including the responder; joint configs give the union, old first."""
    is_leader: bool
    """Whether the responding peer is the leader (always true from ``request_config``)."""

    @property
    def leader_url(self) -> str | None:
        """The leader's ROUTER URL if the leader is in ``peers``."""
        for peer in self.peers:
            if peer.id == self.leader_id:
                return peer.url
        return None


def to_peers(peers: object) -> tuple[Peer, ...]:
    """Normalise ``Sequence[Peer] | Sequence[tuple[id, url]]`` to a tuple of :class:`Peer`."""
    if isinstance(peers, str | bytes) or not hasattr(peers, "__iter__"):
        raise TypeError("peers must be a sequence of Peer or (id, url) pairs")
    out: list[Peer] = []
    for item in peers:
        if isinstance(item, Peer):
            out.append(item)
        elif isinstance(item, tuple | list) and len(item) == 2:
            peer_id, url = item
            if not isinstance(peer_id, str) or not isinstance(url, str):
                raise TypeError(f"peer id and url must be strings, got {item!r}")
            out.append(Peer(peer_id, url))
        else:
            raise TypeError(f"not a Peer or (id, url) pair: {item!r}")
    return tuple(out)
