"""The raftlog exception tree.

Following h11, errors caused by *what a remote party sent* (``RemoteProtocolError``) are kept
apart from errors caused by *misusing our own API* (``LocalProtocolError``): a peer catches the
former at its network edge, logs and counts it, and carries on; the latter is a bug to fix.
"""

from __future__ import annotations


class RaftlogError(Exception):
    """Base class of every error raised on purpose by raftlog."""


class RemoteProtocolError(RaftlogError):
    """A remote party sent bytes that do not form a valid ØMQ RAFT message.

    ``frame`` is the 0-based index of the offending frame within the message as the decoder saw
    it (``None`` when the problem is the message as a whole, e.g. a missing frame count).
    """

    def __init__(self, reason: str, frame: int | None = None) -> None:
        self.reason = reason
        self.frame = frame
        where = f"frame {frame}: " if frame is not None else ""
        super().__init__(f"{where}{reason}")


class LocalProtocolError(RaftlogError, ValueError):
    """Our own code asked to build a message that the protocol cannot express."""


class EntryFormatError(RaftlogError, ValueError):
    """A serialized log entry is malformed (too short, term too wide, ...)."""


class StorageError(RaftlogError):
    """The durable store could not complete an operation (I/O error, disk full, ...).

    The store is left consistent: whatever the failed call would have written is not visible.
    """


class StorageCorruptionError(StorageError):
    """Data read back from the store failed its integrity check; it is never returned as data."""


class EntryTooLargeError(RaftlogError, ValueError):
    """An entry's data exceeds the configured maximum size."""

    def __init__(self, size: int, limit: int) -> None:
        self.size = size
        self.limit = limit
        super().__init__(f"entry data of {size} bytes exceeds the limit of {limit} bytes")


class ConfigError(RaftlogError, ValueError):
    """A cluster configuration (file, CLI flags or peer list) is invalid."""


class NotLeaderError(RaftlogError):
    """The contacted peer is not the leader; ``leader_id`` names the one it knows, if any."""

    def __init__(self, leader_id: str | None) -> None:
        self.leader_id = leader_id
        super().__init__(f"not the leader (leader: {leader_id or 'unknown'})")


class RequestExpiredError(RaftlogError):
    """The request id's timestamp is outside the leader's acceptance window
    (docs/protocol.md §3.1)."""


class ClusterUnavailableError(RaftlogError):
    """No leader answered within the deadline."""


class AuthenticationError(ClusterUnavailableError):
    """Every peer failed this client's CURVE handshake (wrong or missing client key, wrong
    server key, or a plaintext client against a secure cluster): the cluster may well be up,
    but it will not talk to this client."""


class AccessDeniedError(RaftlogError):
    """A secure peer refused the request: the client's key lacks the role or topic right it
    needs, or was revoked. The message is the peer's reason."""


class QuotaExceededError(RaftlogError):
    """The peer refused the request because its principal is over a quota (issue #25):
    nothing was appended. ``retry_after`` is how many seconds to wait before the same
    request would be admitted; ``kind`` which quota (``publish_rate``, ``streams``,
    ``waiting_reads``, ``connections``). The client's retry loop waits that long by itself while its
    deadline allows, and raises this only when it does not."""

    def __init__(self, retry_after: float, kind: str, reason: str) -> None:
        self.retry_after = retry_after
        self.kind = kind
        super().__init__(f"quota exceeded ({kind}): {reason}; retry after {retry_after:.3f} s")


class ConfigUpdateError(RaftlogError):
    """A ConfigUpdate was refused; ``status`` is the protocol status (2, 3 or 4)."""

    def __init__(self, status: int, name: str, message: str) -> None:
        self.status = status
        self.name = name
        self.message = message
        super().__init__(f"config update refused (status {status}): {name}: {message}")


class ClientClosedError(RaftlogError):
    """The client (or the stream or subscriber built on it) was closed while a call waited."""


class DurableStateOutOfRangeError(RaftlogError):
    """The data directory holds a term or index above the ceiling of ``raftlog.bounds``
    (written by a version without the ceiling, e.g. after a forged RequestVote). The peer
    refuses to start (exit code 4) instead of crash-looping; ``raftlog-tool reset-term``
    repairs it offline (docs/peer-service.md)."""


class TopicError(RaftlogError):
    """A publish, admin command or topic RPC was refused; ``name`` is the stable error code
    sent on the wire (``UnknownTopic``, ``TopicExists``, ``RecordTooLarge``, ...), so a
    client can branch on it without parsing the message."""

    def __init__(self, name: str, message: str) -> None:
        self.name = name
        self.message = message
        super().__init__(f"{name}: {message}")


class RecordFormatError(TopicError, ValueError):
    """Bytes or values that do not form a valid topic entry (code ``BadRecord`` unless a more
    precise one applies: ``InvalidTopicName``, ``InvalidProperty``). Re-exported by
    ``raftlog.topics.records``, the format it guards."""

    def __init__(self, message: str, name: str = "BadRecord") -> None:
        super().__init__(name, message)


class ExpectationFailedError(TopicError):
    """A conditional publish was refused at apply: the topic's (or the key's) last record
    was not the one the publisher expected, so nothing of the batch was appended. It says
    what the last record id is now (``current_last`` as ``(index, position)``, None: the
    topic has no record / the key none alive), so an optimistic writer can re-read from
    there and retry (JetStream's expected-last-sequence, docs/topics.md "Conditional
    publish")."""

    def __init__(
        self,
        message: str,
        topic: str,
        current_last: tuple[int, int] | None,
        key: bytes | None = None,
    ) -> None:
        super().__init__("ExpectationFailed", message)
        self.topic = topic
        self.key = key
        self.current_last = current_last


class RecordsExpiredError(TopicError):
    """A topic read asked to start below what the topic still keeps: records there were
    removed by the topic's retention (time or size). ``first_available`` is the first
    position a reader can start from, as ``(index, position)``; it is given so a consumer
    can decide to skip ahead deliberately instead of the log silently doing it (Kafka's
    OffsetOutOfRange)."""

    def __init__(self, message: str, first_available: tuple[int, int]) -> None:
        super().__init__("RecordsExpired", message)
        self.first_available = first_available


class EntriesCompactedError(RaftlogError):
    """A RequestEntries read asked for entries the log no longer has: they were compacted
    into a snapshot. ``first_index`` is where the log now starts."""

    def __init__(self, requested: int, first_index: int) -> None:
        self.requested = requested
        self.first_index = first_index
        super().__init__(
            f"entries from index {requested} were compacted into a snapshot; "
            f"the log now starts at index {first_index}"
        )


class TransactionError(TopicError):
    """A transactional store, commit or rollback was refused (issue #18). ``txid`` names the
    transaction; ``name`` is the stable wire code. Subclasses say why, so a producer can
    branch on the type: retry the whole transaction, or give up."""

    def __init__(self, name: str, message: str, txid: str | None = None) -> None:
        super().__init__(name, message)
        self.txid = txid


class UnknownTransactionError(TransactionError):
    """No open transaction has this id: never begun, or finished so long ago that the peer
    no longer remembers how (``UnknownTransaction``)."""


class TransactionExpiredError(TransactionError):
    """The transaction timed out by the log clock before it committed; none of its records
    will ever be visible (``TransactionExpired``)."""


class TransactionAbortedError(TransactionError):
    """The transaction was rolled back (or aborted at commit because a topic it wrote to was
    deleted); none of its records will ever be visible (``TransactionAborted``)."""


class TransactionCommittedError(TransactionError):
    """The transaction already committed: it takes no more stores and cannot be rolled back
    (``TransactionCommitted``)."""


class TransactionExistsError(TransactionError):
    """A transaction with this id is open already (``TransactionExists``)."""


class TransactionLimitError(TransactionError):
    """A bound was reached: open transactions, or records / bytes in one transaction
    (``TransactionLimit``); the message names the bound."""


class TransactionNotOwnedError(TransactionError):
    """The transaction belongs to another principal: only the one that began it, or an
    admin, may store into, commit, roll back or read it (``TransactionNotOwned``, issue
    #25). A transaction id is a name, not a capability."""


TRANSACTION_ERRORS: dict[str, type[TransactionError]] = {
    "UnknownTransaction": UnknownTransactionError,
    "TransactionExpired": TransactionExpiredError,
    "TransactionAborted": TransactionAbortedError,
    "TransactionCommitted": TransactionCommittedError,
    "TransactionExists": TransactionExistsError,
    "TransactionLimit": TransactionLimitError,
    "TransactionNotOwned": TransactionNotOwnedError,
}
"""Wire code -> exception class: what a client raises for a transaction refusal."""


def transaction_error(name: str, message: str, txid: str | None = None) -> TransactionError:
    """The typed error for wire code ``name`` (``TransactionError`` for codes not listed)."""
    return TRANSACTION_ERRORS.get(name, TransactionError)(name, message, txid)
