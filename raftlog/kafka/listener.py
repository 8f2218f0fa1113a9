"""The Kafka listener: an asyncio TCP server in a daemon thread of the peer process.

Why a thread with its own loop, like the HTTP listener: the consensus loop never waits on
a socket it does not own; the listener reaches the cluster through its own client (the
REST gateway's, on this loop) and learns the applied index from the peer's
:class:`~raftlog.server.apply_signal.ApplySignal`.

Each connection reads one request at a time (4-byte size, then the message), answers it,
then reads the next: Kafka's own rule, which keeps one producer connection's batches in
order. Nothing a client sends stops the listener: an oversize frame or a request that does
not parse closes that connection (what a Kafka broker does); a handler failure is logged
and closes that connection; every other connection carries on. Connections are admitted by
the HTTP listener's :class:`~raftlog.observability.guard.ConnectionGuard` under the
``[kafka]`` limits (a cap within an eighth of the descriptors, per address, a first-request
and an idle time-out, failed accepts logged once a second): a flood of bare connections
used to take every descriptor of the peer, its ZeroMQ port and its writes with them.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import ssl
from collections.abc import Awaitable, Callable
from typing import Any, Final

import structlog
from prometheus_client.registry import Collector

from raftlog.client.runner import LoopStartError, LoopThread
from raftlog.config import PeerSettings
from raftlog.kafka import admin, groups, produce, reading, sasl
from raftlog.kafka.context import KafkaContext
from raftlog.kafka.metrics import KafkaCollector
from raftlog.kafka.protocol import (
    MalformedRequestError,
    Request,
    encode_response,
    frame_size,
    parse_request,
    unsupported_response,
)
from raftlog.kafka.sasl import Session
from raftlog.kafka.settings import split_kafka_url
from raftlog.observability.guard import ConnectionGuard
from raftlog.observability.guard_metrics import GuardCollector
from raftlog.observability.http import tls_context
from raftlog.observability.http_settings import ListenerError
from raftlog.observability.view import ViewBox
from raftlog.rest.gateway import ClusterGateway
from raftlog.server.apply_signal import ApplySignal
from raftlog.web.auth import Authenticator
from raftlog.web.hangups import forget_traceback

START_TIMEOUT: Final = 10.0
log = structlog.get_logger("raftlog.kafka")

Handler = Callable[[KafkaContext, Request], Awaitable[Any]]
HANDLERS: dict[int, Handler] = {
    0: produce.produce,
    1: reading.fetch,
    2: reading.list_offsets,
    3: admin.metadata,
    8: groups.offset_commit,
    9: groups.offset_fetch,
    10: groups.find_coordinator,
    11: groups.join_group,
    12: groups.heartbeat,
    13: groups.leave_group,
    14: groups.sync_group,
    18: admin.api_versions,
    19: admin.create_topics,
    20: admin.delete_topics,
    22: produce.init_producer_id,
    32: admin.describe_configs,
}
"""API key -> handler; :data:`raftlog.kafka.protocol.SUPPORTED` lists the versions."""


class KafkaListenerError(RuntimeError):
    """The listener could not bind its ``kafka_url``."""


class NotAuthenticatedError(Exception):
    """A request other than ApiVersions/SASL before SASL authentication (closes)."""


async def answer(ctx: KafkaContext, frame: bytes, source: str = "-",
                 session: Session | None = None) -> bytes | None:
    """The response bytes to one request frame from address ``source`` on a connection in
    state ``session`` (None: no answer, ``acks=0``); raises ``MalformedRequestError`` for a
    frame that does not parse, ``NotAuthenticatedError`` for a request SASL must precede."""
    session = session if session is not None else Session(required=False)
    request = parse_request(frame, source)
    if not isinstance(request, Request):
        return unsupported_response(request)
    if not session.admits_any and request.api_key not in sasl.BEFORE_AUTH:
        raise NotAuthenticatedError(f"API {request.api_key} before SASL authentication")
    if request.api_key == sasl.SASL_HANDSHAKE:
        payload = sasl.handshake(session, request)
    elif request.api_key == sasl.SASL_AUTHENTICATE:
        payload = sasl.authenticate(session, ctx.auth, request)
    else:
        request = dataclasses.replace(request, who=session.who)
        payload = await HANDLERS[request.api_key](ctx, request)  # SUPPORTED: a handler each
    return None if payload is None else encode_response(request.correlation_id, payload)


class KafkaListener:
    """Serves the Kafka protocol on ``settings.kafka.url`` until :meth:`stop`."""

    def __init__(self, settings: PeerSettings, applied: ApplySignal, views: ViewBox) -> None:
        kafka = settings.kafka
        if kafka is None:
            raise ValueError("the peer has no kafka_url")
        self._host, self._port = split_kafka_url(kafka.url)
        self._max_frame = kafka.max_request_bytes
        self._send_timeout = kafka.send_timeout_ms / 1000
        security = settings.security
        self._sasl = kafka.sasl
        self._tls: ssl.SSLContext | None = None
        if kafka.sasl:  # the [http] certificate; a clear start-up error without one
            try:
                self._tls = tls_context(settings.http)
            except ListenerError as exc:
                raise KafkaListenerError(f"sasl_ssl:// kafka_url: {exc}") from None
        self.gateway = ClusterGateway(
            [peer.url for peer in settings.peers] or [settings.url], settings.url,
            settings.ident, max_entry_size=settings.options.max_log_entry_data_size,
            timeout=settings.rest.request_timeout_ms / 1000, applied=applied,
            curve=None if security is None else security.client)
        self.ctx = KafkaContext(
            kafka, self.gateway, views, peer_id=settings.id, cluster_id=settings.ident,
            max_entry_bytes=settings.options.max_log_entry_data_size,
            request_id_ttl_ms=settings.options.request_id_ttl, quota=settings.quotas,
            auth=Authenticator(security if kafka.sasl else None))
        self.guard = ConnectionGuard(kafka, self._tls, name="kafka", refusal=None)
        """Admits the connections (its ``open`` and ``cap`` say how many)."""
        self._runner = LoopThread(  # the one loop-thread runner (raftlog.client.runner)
            "raftlog-kafka", owner="the Kafka listener", setup=self._open, teardown=self._close,
            exception_handler=self.guard.loop_errors,
        )
        self._sweeper: asyncio.Future[None] | None = None
        self._connections: set[asyncio.Task[None]] = set()

    def collectors(self) -> tuple[Collector, ...]:
        """The listener's metrics for the peer's ``/metrics``: its connection guard's and
        its group coordinator's (``raftlog_kafka_*``)."""
        return GuardCollector(self.guard, "Kafka"), KafkaCollector(self.ctx)

    def start(self) -> None:
        """Bind and serve; raises ``KafkaListenerError`` when the port cannot be bound."""
        where = f"{self._host}:{self._port}"
        try:
            self._runner.start(START_TIMEOUT)
        except LoopStartError:
            raise KafkaListenerError(f"Kafka listener on {where} did not start") from None
        except Exception as exc:  # the bind (or the gateway) failed in setup
            raise KafkaListenerError(f"cannot serve Kafka on {where}: {exc}") from None

    async def _open(self) -> None:
        await self.gateway.start()
        self.guard.listen(
            lambda: asyncio.StreamReaderProtocol(asyncio.StreamReader(), self._serve),
            self._host, self._port,
        )
        self._sweeper = asyncio.ensure_future(self._sweep())

    async def _sweep(self) -> None:
        """Evict group members whose session timed out, once a second."""
        while True:
            await asyncio.sleep(1.0)
            self.ctx.coordinator.sweep()

    async def _close(self) -> None:
        self.gateway.shutting_down()
        if self._sweeper is not None:
            self._sweeper.cancel()
        self.ctx.coordinator.clear()
        self.guard.close()
        for task in list(self._connections):
            task.cancel()
        for task in list(self._connections):
            with contextlib.suppress(BaseException):
                await task
        await self.gateway.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if task is not None:
            self._connections.add(task)
        peer = writer.get_extra_info("peername")
        source = str(peer[0]) if isinstance(peer, tuple) and peer else "-"
        session = Session(required=self._sasl)
        head = b""
        try:
            while True:
                size = frame_size(await reader.readexactly(4))
                if not 0 < size <= self._max_frame:
                    log.warning("kafka_bad_frame", peer=str(peer), size=size)
                    return
                held = self.ctx.request_memory.counted(size)  # 0 for a small frame
                await self.ctx.request_memory.acquire(held)  # not read until it fits
                try:
                    try:  # a trickled frame may not hold the budget for long; not
                        async with asyncio.timeout(self._send_timeout):  # wait_for: on 3.11
                            frame = await reader.readexactly(size)  # a client gone mid-frame
                    except TimeoutError:  # left its partial bytes in a reference cycle
                        self.guard.flood.event("kafka_request_too_slow", peer=str(peer))
                        return
                    head = frame[:48]
                    with self.guard.handling(writer.transport):  # never reaped meanwhile
                        reply = await answer(self.ctx, frame, source, session)
                    del frame  # the budget no longer counts it
                    if reply is not None:
                        writer.write(reply)
                        await writer.drain()  # the guard aborts a client that stops reading
                finally:  # a Fetch answer's bytes count until the socket took them
                    self.ctx.fetch_memory.release_request()
                    self.ctx.request_memory.give(held)
        except (asyncio.IncompleteReadError, ConnectionError, ssl.SSLError) as exc:
            forget_traceback(exc)  # a hung-up client's drain waiter would keep the answer
            return
        except (MalformedRequestError, NotAuthenticatedError) as exc:
            log.warning("kafka_bad_request", peer=str(peer), reason=str(exc),
                        head=head.hex())
        except asyncio.CancelledError:  # the listener stops: end this connection quietly
            return
        except Exception:  # a handler bug must not end the listener: this connection only
            log.exception("kafka_handler_failed", peer=str(peer))
        finally:
            if task is not None:
                self._connections.discard(task)
            writer.close()

    def stop(self) -> None:
        """Close the server and every connection, end the thread (idempotent)."""
        self._runner.stop(START_TIMEOUT)


def start_kafka(settings: PeerSettings, applied: ApplySignal,
                views: ViewBox) -> KafkaListener | None:
    """The running listener of a peer with a ``kafka_url``; None without one."""
    if settings.kafka is None:
        return None
    listener = KafkaListener(settings, applied, views)
    listener.start()
    return listener
