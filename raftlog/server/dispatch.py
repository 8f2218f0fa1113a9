"""The ROUTER dispatcher: one inbound message -> the handler of its type (docs/protocol.md §5.3).

Order of checks, as the reference: too few frames -> dropped; wrong cluster ident -> dropped
silently (a client with the wrong ident sees a timeout, §15.2); then the codec decodes the
arguments. Unlike the reference (§5.4) a malformed message never takes the peer down: the
codec raises ``RemoteProtocolError``, which is counted, logged (sampled) and dropped, leaving
term and log untouched. A peer RPC whose term or index is above the ceiling of
``raftlog.bounds`` is dropped the same way, counted and logged as ``term_out_of_range`` /
``index_out_of_range`` (issue #12).

Which service handles which type is a table (``HandlerTable``) the peer builds from its
services (``raftlog.server.wiring``); types without an entry go to the fallback (the state
machine's own request types, §10.6). The dispatcher knows no service and no peer.

A type whose handler only queues (``MessageRow.flush``: RequestUpdate, proposed as one batch
per drain, issue #28) has its queue handled before any message of another type and when the
peer calls :meth:`Dispatcher.flush` at the end of the drain: effects keep the arrival order.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Final, TypeVar

from raftlog.errors import LocalProtocolError, RemoteProtocolError
from raftlog.metrics import CounterValue, PeerMetrics
from raftlog.rpc.codec import decode_request_args
from raftlog.rpc.messages import Request
from raftlog.rpc.ranges import OutOfRangeError
from raftlog.server.interfaces import EventLog

HEADER_FRAMES: Final = 4
"""routing id, id, type, ident."""
LOG_SAMPLE: Final = 100
"""Log one in this many repeated drops of the same kind (the counters keep them all)."""

Handler = Callable[[bytes, bytes, Request], None]
"""``handler(routing_id, msg_id, message)``."""
HandlerTable = Mapping[bytes, Handler]
"""Message type (the type frame) -> its handler."""
QueueFlushes = Mapping[bytes, Callable[[], None]]
"""Message type -> what handles the queue its handler fills (``MessageRow.flush``)."""

_M = TypeVar("_M")


def route(kind: type[_M], handle: Callable[[bytes, bytes, _M], None]) -> Handler:
    """A table entry for ``handle``, which takes only messages of ``kind`` (what the codec
    decodes that type frame to; anything else is a wiring bug, raised loudly)."""

    def checked(routing: bytes, msg_id: bytes, message: Request) -> None:
        if not isinstance(message, kind):
            raise LocalProtocolError(f"{handle!r} got {type(message).__name__}, not {kind}")
        handle(routing, msg_id, message)

    return checked


class Dispatcher:
    """Checks the header, decodes, and calls the handler of the message's type."""

    def __init__(
        self,
        ident: bytes,
        handlers: HandlerTable,
        fallback: Handler,
        metrics: PeerMetrics,
        log: EventLog,
        *,
        queues: QueueFlushes | None = None,
    ) -> None:
        self._ident = ident
        self._handlers = dict(handlers)
        self._queues: QueueFlushes = queues or {}
        """Types whose handler only queues -> what handles the queue (``MessageRow.flush``)."""
        self._due: list[Callable[[], None]] = []
        """The flushes owed since the last ``flush``, in the order their queues started."""
        self._fallback = fallback
        self._log = log
        dropped = self._dropped = metrics.messages_dropped
        self._short = dropped.labels(reason="short_message")
        self._wrong_ident = dropped.labels(reason="wrong_ident")
        self._empty_type = dropped.labels(reason="empty_type")
        self._malformed = dropped.labels(reason="malformed_message")

    def _drop(self, counter: CounterValue, event: str, **fields: object) -> None:
        count = counter.inc()
        if count % LOG_SAMPLE == 1:
            self._log.warning(event, count=count, **fields)

    def on_message(self, frames: list[bytes]) -> None:
        """Handle ``[routing, id, type, ident, args...]`` from the ROUTER."""
        if len(frames) < HEADER_FRAMES:
            self._drop(self._short, "short_message_dropped", frames=len(frames))
            return
        routing, msg_id, msg_type, ident = frames[0], frames[1], frames[2], frames[3]
        if ident != self._ident:
            self._drop(self._wrong_ident, "wrong_ident_dropped", msg_type=msg_type[:8].hex())
            return
        if not msg_type:
            self._drop(self._empty_type, "empty_type_dropped")
            return
        try:
            message = decode_request_args(msg_type, msg_id, frames[HEADER_FRAMES:])
        except OutOfRangeError as exc:  # a forged or corrupt huge term/index (raftlog.bounds)
            self._drop(
                self._dropped.labels(reason=exc.drop_reason),
                exc.drop_reason,
                msg_type=msg_type[:8].hex(),
                reason=str(exc),
            )
            return
        except RemoteProtocolError as exc:
            self._drop(
                self._malformed,
                "malformed_message_dropped",
                msg_type=msg_type[:8].hex(),
                reason=str(exc),
            )
            return
        queued = self._queues.get(msg_type)
        if queued is None:
            if self._due:
                self.flush()
        elif queued not in self._due:
            self._due.append(queued)
        self._handlers.get(msg_type, self._fallback)(routing, msg_id, message)

    def queued_run(self, msg_type: bytes) -> None:
        """Messages of ``msg_type`` went straight into its handler's queue (a compiled run,
        ``raftlog.transport.take_run``): its flush is now due, before any message of
        another type, as if ``on_message`` had queued them."""
        queued = self._queues[msg_type]
        if queued not in self._due:
            self._due.append(queued)

    def flush(self) -> None:
        """Handle everything queued since the last flush (the peer calls this at the end of
        every ROUTER drain; ``on_message`` before any message of another type)."""
        due, self._due = self._due, []
        for flush in due:
            flush()
