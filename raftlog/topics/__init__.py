"""Topics: the one home of the topic model, end to end (issue #26).

Everything a topic is lives here: the record format carried in log entries (``records``,
``record_decode``, ``records_tx``, ``record_scan``), the leader's gate and clock (``gate``,
``clock``), the state machine every peer applies (``machine`` with ``machine_views``,
``index``, ``reads``, ``retention``, ``counters``, ``rules``, ``tx``, ``tx_rows``,
``commit``, ``snapshot``, ``opening``, ``requests``), the topic RPCs' frame codecs (``wire``,
``wire_publish``, ``wire_counts``, ``wire_errors``, ``wire_tx``; ``raftlog.rpc`` stays a leaf
that knows no topic), and the client API over the transport (``client`` with
``client_read_calls``, ``client_stream``, ``client_view``, ``client_tx``, the key-value view
``kv`` (#29, with ``records_kv``, ``compacted``, ``kv_state``, ``wire_kv``) and their
blocking faces ``sync_client``, ``sync_client_tx``).

The public client API is importable from here: ``TopicClient`` and its blocking twin
``SyncTopicClient``; transactions across calls with ``Transaction`` / ``SyncTransaction``
(``TopicClient.transaction()``); the record and answer types. The names load on first use
(PEP 562): the peer imports ``raftlog.topics.records`` and friends while the client
transport (``raftlog.client``) is still being imported, so this package must not pull the
client in eagerly.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from raftlog.errors import (
        ExpectationFailedError,
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
    from raftlog.topics.client import TopicClient
    from raftlog.topics.client_tx import Transaction
    from raftlog.topics.kv import KeyValue, KeyValueEvent, SyncKeyValue
    from raftlog.topics.record_builder import make_record
    from raftlog.topics.records import (
        Expectation,
        LoggedRecord,
        Record,
        RecordId,
        TopicProperties,
    )
    from raftlog.topics.records_kv import NO_RECORD
    from raftlog.topics.sync_client import SyncTopicClient
    from raftlog.topics.sync_client_tx import SyncTransaction
    from raftlog.topics.wire import ReadResult, TopicInfo
    from raftlog.topics.wire_tx import TransactionInfo

_EXPORTS: Final[dict[str, str]] = {
    "ExpectationFailedError": "raftlog.errors",
    "Expectation": "raftlog.topics.records",
    "KeyValue": "raftlog.topics.kv",
    "KeyValueEvent": "raftlog.topics.kv",
    "SyncKeyValue": "raftlog.topics.kv",
    "NO_RECORD": "raftlog.topics.records_kv",
    "RecordsExpiredError": "raftlog.errors",
    "TopicError": "raftlog.errors",
    "TransactionAbortedError": "raftlog.errors",
    "TransactionCommittedError": "raftlog.errors",
    "TransactionError": "raftlog.errors",
    "TransactionExistsError": "raftlog.errors",
    "TransactionExpiredError": "raftlog.errors",
    "TransactionLimitError": "raftlog.errors",
    "UnknownTransactionError": "raftlog.errors",
    "TopicClient": "raftlog.topics.client",
    "Transaction": "raftlog.topics.client_tx",
    "make_record": "raftlog.topics.record_builder",
    "LoggedRecord": "raftlog.topics.records",
    "Record": "raftlog.topics.records",
    "RecordId": "raftlog.topics.records",
    "TopicProperties": "raftlog.topics.records",
    "SyncTopicClient": "raftlog.topics.sync_client",
    "SyncTransaction": "raftlog.topics.sync_client_tx",
    "ReadResult": "raftlog.topics.wire",
    "TopicInfo": "raftlog.topics.wire",
    "TransactionInfo": "raftlog.topics.wire_tx",
}
"""Public name -> the module that defines it."""

__all__ = [
    "NO_RECORD",
    "Expectation",
    "ExpectationFailedError",
    "KeyValue",
    "KeyValueEvent",
    "SyncKeyValue",
    "LoggedRecord",
    "ReadResult",
    "Record",
    "RecordId",
    "RecordsExpiredError",
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


def __getattr__(name: str) -> object:
    """Load a public name from its home module on first use (see the module docstring)."""
    home = _EXPORTS.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value: object = getattr(importlib.import_module(home), name)
    globals()[name] = value
    return value
