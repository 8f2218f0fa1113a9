"""One ``zmq.asyncio`` DEALER per peer URL, and the request-id -> waiter registry.

Frames travel as the protocol wants them from a DEALER: ``[id, type, ident, args...]`` out,
``[id, response...]`` in, no empty delimiter frame (docs/protocol.md §1). Each channel owns exactly
one socket and one reader task (the only code that calls ``recv`` on it); the reader hands
every response to a :class:`Waiters` registry keyed by the echoed id frame, and responses
nobody waits for (late, duplicate, for a finished call) are dropped there.

Timeouts use ``asyncio.timeout`` rather than ``asyncio.wait_for``: on Python 3.11 the latter
can swallow a cancellation that races with the awaited result (gh-86296), which would make a
task running a client call impossible to cancel.

Socket options: ``LINGER=0`` (a closed client never blocks on undeliverable requests). A
message is queued only while the connection is up: a send to a dead peer waits (and the
caller times out and tries the next peer) instead of piling up requests that a restarted peer
would replay much later. That gate is the channel's own, opened and closed by the socket's
monitor events, not ``ZMQ_IMMEDIATE``: with it libzmq aborted a client that was reading a
multipart answer when the peer died (``raftlog.sockets`` says how).

ZeroMQ never tells a sender that a connection was refused: it retries in the background. So
each channel also reads its socket's monitor events (:func:`raftlog.sockets.connection_monitor`)
into a :class:`ConnectionState` -- connected, or refusing since when -- which lets the client
fail within a second or two when every peer refuses, and say so, instead of waiting out its
whole deadline (issue #13).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Final

import zmq
import zmq.asyncio
from zmq.utils.monitor import parse_monitor_message

from raftlog import sockets
from raftlog.client.logs import client_log
from raftlog.errors import AccessDeniedError, QuotaExceededError
from raftlog.rpc.denied import access_denied_reason, quota_refusal_of
from raftlog.security.settings import CurveClient

HANDSHAKE_FAILURES: Final[dict[int, str]] = {
    zmq.EVENT_HANDSHAKE_FAILED_AUTH: "the peer refused this client's key",
    zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL: "security mechanisms differ (a plaintext client and a "
    "CURVE peer, or the other way round)",
    zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL: "the handshake failed (is the cluster's server key "
    "right?)",
}
"""Monitor events of a failed ZMTP security handshake, and what each most likely means."""

AUTH_REQUIRED: Final = "authentication required (this cluster uses CURVE)"
"""Why a *plaintext* client's handshakes fail: the peer speaks CURVE (issue #33 item 3)."""

CLOSED_IN_HANDSHAKE: Final = "the peer closed every connection during the security handshake"
"""A CURVE client's connections dropped before the handshake ended (a reset can discard the
greeting that would have said why)."""


def raise_if_denied(frames: list[bytes]) -> None:
    """Raise ``AccessDeniedError`` if ``frames`` (an answer, msgid first) is a secure peer's
    refusal, ``QuotaExceededError`` if it is a quota refusal; every place that decodes an
    answer calls this first."""
    reason = access_denied_reason(frames)
    if reason is not None:
        raise AccessDeniedError(reason)
    quota = quota_refusal_of(frames)
    if quota is not None:
        raise QuotaExceededError(quota.retry_after_ms / 1000, quota.kind, quota.reason)


@dataclass(frozen=True, slots=True)
class Delivery:
    """One response as received: which channel (peer URL) it came from, and its frames."""

    url: str
    frames: list[bytes]


CLOSED: Final = Delivery("", [])
"""Sentinel put into every inbox when the registry is closed (the client went away)."""

Inbox = asyncio.Queue[Delivery]


async def cancel_and_wait(task: asyncio.Task[Any]) -> None:
    """Cancel ``task`` and wait until it ended. Unlike ``suppress(CancelledError): await
    task``, this never swallows a cancellation of the *calling* task."""
    task.cancel()
    await asyncio.wait({task})
    if not task.cancelled():
        task.exception()  # retrieved: never logged as "exception was never retrieved"


async def next_delivery(inbox: Inbox, timeout: float) -> Delivery | None:
    """The next delivery in ``inbox``, or None after ``timeout`` seconds."""
    if timeout <= 0:
        return None if inbox.empty() else inbox.get_nowait()
    try:
        async with asyncio.timeout(timeout):
            return await inbox.get()
    except TimeoutError:
        return None


class Waiters:
    """Request id -> inboxes of the callers waiting for responses carrying that id.

    Several inboxes may wait for the same id (two calls retrying the same update reqid).
    """

    def __init__(self) -> None:
        self._by_id: dict[bytes, list[Inbox]] = {}
        self._closed = False

    @contextlib.contextmanager
    def register(self, req_id: bytes) -> Iterator[Inbox]:
        """An inbox receiving every response with ``req_id`` until the block exits."""
        inbox: Inbox = asyncio.Queue()
        if self._closed:
            inbox.put_nowait(CLOSED)
        self._by_id.setdefault(req_id, []).append(inbox)
        try:
            yield inbox
        finally:
            inboxes = self._by_id.get(req_id)
            if inboxes is not None:
                inboxes.remove(inbox)
                if not inboxes:
                    del self._by_id[req_id]

    def deliver(self, url: str, frames: list[bytes]) -> bool:
        """Hand a response to its waiters; False (dropped) when nobody waits for its id."""
        if not frames:
            return False
        inboxes = self._by_id.get(frames[0])
        if not inboxes:
            return False
        delivery = Delivery(url, frames)
        for inbox in inboxes:
            inbox.put_nowait(delivery)
        return True

    def close(self) -> None:
        """Wake every waiter with :data:`CLOSED`; later registrations get it at once."""
        self._closed = True
        for inboxes in self._by_id.values():
            for inbox in inboxes:
                inbox.put_nowait(CLOSED)


class ConnectionState:
    """What the socket monitor said about one connection, in loop-clock seconds.

    ``refused_since`` is the time of the first failed connection attempt since the last
    successful one (None while connected, and before the first attempt ended): a peer that
    is down, or a port nobody listens on, keeps it set while ZeroMQ keeps retrying.
    """

    __slots__ = (
        "auth_error",
        "connected",
        "curve",
        "ever_connected",
        "handshaking",
        "refusals",
        "refused_since",
    )

    def __init__(self, curve: bool = False) -> None:
        self.curve = curve
        """Whether this client speaks CURVE (a plaintext one is told the cluster needs it)."""
        self.handshaking = False
        """TCP connected, security handshake not yet succeeded: a disconnection now is a
        handshake failure even when no handshake event said so (libzmq >= 4.3 reports a
        success for every mechanism; a reset can swallow the peer's greeting and with it
        the failure event -- the intermittent "unreachable x19" of issue #33)."""
        self.connected = False
        self.ever_connected = False
        self.refused_since: float | None = None
        self.refusals = 0
        self.auth_error: str | None = None
        """Why the last security handshake failed (a CURVE key problem), until one succeeds:
        such a connection counts as refused even though its TCP connect worked."""

    def on_event(self, event: int, now: float) -> None:
        """Fold one monitor event in."""
        if event == zmq.EVENT_CONNECTED:
            self.handshaking = True
            if self.auth_error is None:  # else only a handshake success clears the refusal
                self.connected = self.ever_connected = True
                self.refused_since = None
        elif event == zmq.EVENT_HANDSHAKE_SUCCEEDED:
            self.handshaking = False
            self.connected = self.ever_connected = True
            self.refused_since = self.auth_error = None
        elif event in HANDSHAKE_FAILURES:
            self._handshake_failed(HANDSHAKE_FAILURES[event], now)
        elif event == zmq.EVENT_DISCONNECTED:
            self.connected = False
            if self.handshaking:
                self._handshake_failed(CLOSED_IN_HANDSHAKE, now)
        elif event == zmq.EVENT_CONNECT_RETRIED and not self.connected:
            self.refusals += 1
            if self.refused_since is None:
                self.refused_since = now

    def _handshake_failed(self, why: str, now: float) -> None:
        self.handshaking = self.connected = False
        self.auth_error = why if self.curve else AUTH_REQUIRED
        self.refusals += 1
        if self.refused_since is None:
            self.refused_since = now

    def refusing_for(self, now: float) -> float | None:
        """Seconds this connection has been refused without a success, or None."""
        return None if self.refused_since is None else now - self.refused_since


class DealerChannel:
    """A DEALER connected to one peer URL, with its reader task and its connection watch.
    Create inside a running loop."""

    def __init__(
        self,
        context: zmq.asyncio.Context,
        url: str,
        waiters: Waiters,
        curve: CurveClient | None = None,
    ) -> None:
        self.url = url
        self._waiters = waiters
        sock, self._monitor = sockets.monitored_client_dealer(context, url, curve=curve)
        self._socket = sock
        self._sync_socket: zmq.Socket[bytes] = zmq.Socket.shadow(sock.underlying)
        self.state = ConnectionState(curve=curve is not None)
        """Connection state from the socket monitor (see :class:`ConnectionState`)."""
        self._link_up = asyncio.Event()
        """Set while ``state.connected``: the gate every send waits at."""
        if sockets.link_up_from_start(url):
            self._link_up.set()
        self._closed = False
        loop = asyncio.get_running_loop()
        self._reader = loop.create_task(self._read(), name=f"raftlog-client-reader {url}")
        self._watcher = loop.create_task(self._watch(), name=f"raftlog-client-monitor {url}")

    @property
    def closed(self) -> bool:
        """True once :meth:`aclose` was called."""
        return self._closed

    async def send(self, frames: list[bytes], timeout: float) -> bool:
        """Queue ``frames`` on the connection; False if it is not writable within ``timeout``
        seconds (peer down or not yet connected) or the socket is closed."""
        if self._closed:
            return False
        try:
            async with asyncio.timeout(max(timeout, 0.0)):
                if not self._link_up.is_set():
                    await self._link_up.wait()
                await self._socket.send_multipart(frames)
        except (TimeoutError, zmq.ZMQError):
            return False
        return True

    def send_nowait(self, frames: list[bytes]) -> bool:
        """Best-effort send that never waits (used for stream stop messages); False while
        the connection is down."""
        if self._closed or not self._link_up.is_set():
            return False
        try:
            self._sync_socket.send_multipart(frames, flags=zmq.NOBLOCK)
        except zmq.ZMQError:
            return False
        return True

    async def _read(self) -> None:
        sock = self._socket
        waiters = self._waiters
        url = self.url
        while True:
            try:
                frames = await sock.recv_multipart()
            except zmq.ZMQError as exc:
                if not self._closed:
                    client_log().debug("client_reader_stopped", url=url, error=str(exc))
                return
            if not waiters.deliver(url, frames):
                client_log().debug("client_response_dropped", url=url, id=frames[0][:12].hex())

    async def _watch(self) -> None:
        monitor = self._monitor
        loop = asyncio.get_running_loop()
        while True:
            try:
                frames = await monitor.recv_multipart()
                event = parse_monitor_message(frames)["event"]
            except (zmq.ZMQError, ValueError, KeyError):
                return
            self.state.on_event(int(event), loop.time())
            if self.state.connected:
                self._link_up.set()
            else:
                self._link_up.clear()

    async def aclose(self, linger_ms: int = 0) -> None:
        """Stop the reader and close the socket. ``linger_ms`` > 0 gives messages already
        queued (a stream's stop request) that long to leave; nothing ever waits for it."""
        if self._closed:
            return
        self._closed = True
        try:
            await cancel_and_wait(self._reader)
            await cancel_and_wait(self._watcher)
        finally:
            with contextlib.suppress(zmq.ZMQError):
                self._socket.disable_monitor()
            self._monitor.close(linger=0)
            self._socket.close(linger=linger_ms)
