"""The narrow interfaces the server's services need, and nothing more.

Why: a service that receives the whole peer can reach anything, so nobody can tell what it
depends on, and its test needs a stub of the whole peer. Each service here takes only the
Protocols it uses; ``RaftCore``, the stores and ``ReplySender`` satisfy them structurally,
and the unit tests pass small plain fakes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol

from raftlog.consensus import ConfigProposeResult, ProposeResult
from raftlog.rpc.messages import ConfigPayload, PeerRequest
from raftlog.server.replies import ServerReply
from raftlog.storage.base import SnapshotMeta


class EventLog(Protocol):
    """Structured logging as the services use it (a structlog bound logger)."""

    def info(self, event: str, **fields: object) -> object:
        """An event worth an operator's attention in normal operation."""
        ...

    def warning(self, event: str, **fields: object) -> object:
        """Something went wrong from outside (bad input, a gone client)."""
        ...

    def error(self, event: str, **fields: object) -> object:
        """Something this peer cannot fix by itself (a refused truncation, a bad config)."""
        ...


class Replies(Protocol):
    """The one way out for every answer to a ROUTER request (``ReplySender``)."""

    def reply(self, routing: bytes, msg_id: bytes, message: ServerReply) -> None:
        """Encode ``message`` (``raftlog.rpc``) and send it to ``routing`` with the request's
        id frame ``msg_id`` echoed; dropped (and counted) if the client is gone."""
        ...

    def update_done(self, routing: bytes, rid: bytes, index: int) -> None:
        """``reply(routing, rid, RequestUpdateResponse(rid, DONE, index=index))``, the
        answer sent once per committed update, without building the message."""
        ...

    def updates_done(self, first: int, waiters: Sequence[tuple[bytes, bytes, bool]]) -> None:
        """``update_done(routing, rid, first + k)`` of the ``k``-th ``(routing, rid, _)``
        waiter: a released run of a batch's appended updates, in one call."""
        ...


class LeaderView(Protocol):
    """Who leads, as this peer knows it."""

    @property
    def is_leader(self) -> bool:
        """Whether this peer leads now."""
        ...

    @property
    def leader_id(self) -> str | None:
        """The leader this peer follows, if known."""
        ...


class ClusterView(LeaderView, Protocol):
    """Read-only consensus state for queries (RequestConfig, RequestLogInfo, sender checks)."""

    @property
    def term(self) -> int:
        """The current term."""
        ...

    @property
    def commit_index(self) -> int:
        """The highest index known committed."""
        ...

    @property
    def config(self) -> ConfigPayload:
        """The configuration in effect."""
        ...

    @property
    def config_known(self) -> bool:
        """False right after a snapshot install, until a CONFIG entry arrives."""
        ...


class Proposer(Protocol):
    """The leader's proposals (``RaftCore.propose`` / ``propose_many`` / ``propose_config``)."""

    def propose(
        self,
        request_id: bytes,
        data: bytes,
        now_ms: int,
        prepare: Callable[[bytes], bytes | Exception] | None = None,
        *,
        latest_ms: int | None = None,
    ) -> ProposeResult:
        """Append a STATE entry unless the request id is known (§10.3)."""
        ...

    def propose_many(
        self,
        requests: Sequence[tuple[bytes, bytes]],
        now_ms: int,
        prepare: Callable[[bytes], bytes | Exception] | None = None,
        *,
        latest_ms: int | None = None,
    ) -> list[ProposeResult]:
        """``propose`` of each ``(request_id, data)`` in order, as one batch (issue #28)."""
        ...

    def propose_config(
        self, request_id: bytes, peers: object, now_ms: int, *, latest_ms: int | None = None
    ) -> ConfigProposeResult:
        """Start a configuration change (§10.4)."""
        ...


class PeerRequestSink(Protocol):
    """Where inbound peer RPCs go (``RaftCore.step_request``)."""

    def heard_from_leader(self, leader_id: str, term: int) -> None:
        """A retransmission from ``leader_id`` was answered from the debounce cache."""
        ...

    def step_request(self, token: object, message: PeerRequest) -> None:
        """Step ``message``; its answer comes back as ``SendReply(token, ...)``."""
        ...


class AppliedView(Protocol):
    """The state machine's progress."""

    @property
    def last_applied(self) -> int:
        """Index of the last entry applied."""
        ...


class LogBounds(Protocol):
    """The log's extent, for RequestLogInfo."""

    @property
    def first_index(self) -> int:
        """The first index readable as an entry."""
        ...

    @property
    def last_index(self) -> int:
        """The last index in the log."""
        ...

    def oldest_request_index(self) -> int | None:
        """Lowest index still in the request-id index (prune index + 1)."""
        ...


class SnapshotView(Protocol):
    """The installed snapshot's metadata."""

    def meta(self) -> SnapshotMeta | None:
        """None when no snapshot is installed."""
        ...


class Compactor(Protocol):
    """The compaction policy's on-demand entry point (``raftlog-admin compact``)."""

    def start(self, on_done: Callable[[int | None], None] | None = None) -> None:
        """Compact now: the snapshot is built over the next timer passes, then ``on_done``
        gets the new snapshot index, or None when nothing could be compacted."""
        ...


class RequestHandler(Protocol):
    """The state machine's own request types (docs/protocol.md §10.6)."""

    def handle_request(self, msg_type: bytes, args: Sequence[bytes]) -> list[bytes] | None:
        """The answer frames after the id, or None for no answer."""
        ...
