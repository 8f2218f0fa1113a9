"""The raftlog client: asyncio ``RaftClient``, blocking ``SyncRaftClient`` and ``Subscriber``.

Wire-compatible with zmq-raft clusters (docs/protocol.md §10, §11, §13): leader discovery and
following, idempotent updates (retries reuse the request id), back-pressured RequestEntries
streams and gap-free live subscriptions. ``Done`` / ``Redirect`` / ``WAIT`` are the outcomes
an interpreter returns to :meth:`RaftClient.leader_request` (requests of other layers).

Topics (``TopicClient``, ``SyncTopicClient``, transactions) are built on this transport and
live with the rest of the topic model: :mod:`raftlog.topics`.
"""

from raftlog.client.client import RaftClient
from raftlog.client.entries import EntryStream
from raftlog.client.models import ClusterInfo, IndexedEntry, StreamItem
from raftlog.client.routing import WAIT, Done, Outcome, Redirect
from raftlog.client.subscriber import Subscriber
from raftlog.client.sync import SyncRaftClient
from raftlog.rpc.messages import Peer, RequestLogInfoResponse, SnapshotChunk

__all__ = [
    "WAIT",
    "ClusterInfo",
    "Done",
    "EntryStream",
    "IndexedEntry",
    "Outcome",
    "Peer",
    "RaftClient",
    "Redirect",
    "RequestLogInfoResponse",
    "SnapshotChunk",
    "StreamItem",
    "Subscriber",
    "SyncRaftClient",
]
