"""The raftlog client: asyncio ``RaftClient``, blocking ``SyncRaftClient`` and ``Subscriber``;
topics with ``TopicClient`` and its blocking twin ``SyncTopicClient``; transactions across
calls with ``Transaction`` / ``SyncTransaction`` (``TopicClient.transaction()``).

Wire-compatible with zmq-raft clusters (docs/protocol.md §10, §11, §13): leader discovery and
following, idempotent updates (retries reuse the request id), back-pressured RequestEntries
streams and gap-free live subscriptions. ``Done`` / ``Redirect`` / ``WAIT`` are the outcomes
an interpreter returns to :meth:`RaftClient.leader_request` (requests of other layers).
"""

from raftlog.client.client import RaftClient
from raftlog.client.entries import EntryStream
from raftlog.client.models import ClusterInfo, IndexedEntry, StreamItem
from raftlog.client.routing import WAIT, Done, Outcome, Redirect
from raftlog.client.subscriber import Subscriber
from raftlog.client.sync import SyncRaftClient
from raftlog.client.sync_topics import SyncTopicClient
from raftlog.client.sync_transactions import SyncTransaction
from raftlog.client.topics import TopicClient, make_record
from raftlog.client.transactions import Transaction
from raftlog.errors import (
    RecordsExpiredError,
    TopicError,
    TransactionAbortedError,
    TransactionCommittedError,
    TransactionError,
    TransactionExistsError,
    TransactionExpiredError,
    TransactionLimitError,
    UnknownTransactionError,
)
from raftlog.records import LoggedRecord, Record, RecordId, TopicProperties
from raftlog.rpc.messages import Peer, RequestLogInfoResponse, SnapshotChunk
from raftlog.rpc.topics import ReadResult, TopicInfo
from raftlog.rpc.transactions import TransactionInfo

__all__ = [
    "WAIT",
    "ClusterInfo",
    "Done",
    "EntryStream",
    "IndexedEntry",
    "LoggedRecord",
    "Outcome",
    "Peer",
    "RaftClient",
    "ReadResult",
    "Record",
    "RecordId",
    "RecordsExpiredError",
    "Redirect",
    "RequestLogInfoResponse",
    "SnapshotChunk",
    "StreamItem",
    "Subscriber",
    "SyncRaftClient",
    "SyncTopicClient",
    "SyncTransaction",
    "TopicClient",
    "TopicError",
    "TopicInfo",
    "TopicProperties",
    "Transaction",
    "TransactionAbortedError",
    "TransactionCommittedError",
    "TransactionError",
    "TransactionExistsError",
    "TransactionExpiredError",
    "TransactionInfo",
    "TransactionLimitError",
    "UnknownTransactionError",
    "make_record",
]
