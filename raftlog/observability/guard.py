"""Connection governance of the HTTP and Kafka listeners: caps, timeouts, reaping, quiet
floods.

Why our own accept loop instead of ``loop.create_server``: asyncio accepts every connection
it can and, once descriptors run out, logs a traceback per failed accept; aiohttp has no
timeout for a request's headers. ~20,000 half-open connections trickling headers then used
up a peer's descriptors, its ZeroMQ port stopped answering and its log grew by 100 MB
(issue #25); a flood of bare TCP connections did the same through the Kafka listener,
with ~880,000 log lines in a minute. Here every accepted socket is counted *before* any
protocol sees it (the limits: ``[http]`` or ``[kafka]``, :class:`ListenerLimits`):

- at ``cap`` connections (``[http] max_connections``, never more than half the descriptor
  limit) a new connection displaces one that is not handling a request (a half-open one
  trickling headers, a TLS handshake, an idle keep-alive): the oldest such connection of
  the address that holds the most connections, else the oldest such one of any address.
  A flood only churns through its own connections, even while a probe's request waits
  for the loop's next pass (oldest-first alone evicted it there when the loop fell
  behind). When every connection is busy (e.g. as many long polls), or
  ``max_connections_per_address`` are open from the new one's address, it gets a one-line
  503 (plain HTTP; Kafka has no such answer: closed) and is closed at once -- a fast
  refusal, one descriptor for a moment;
- when accept itself fails for lack of descriptors, accepting pauses briefly instead of
  spinning, and the failure is logged once a second with a count (:class:`FloodLog`);
- a connection (or TLS handshake) that has not produced a request within
  ``header_timeout_ms``, or a kept-alive one idle for ``idle_timeout_ms``, is aborted by a
  reaper that runs once a second; a request being handled (a long poll) is never reaped;
- a connection whose client has taken none of its pending output (an answer) for
  ``send_timeout_ms`` is aborted by the same reaper, busy or not, and its answer freed
  (``raftlog.observability.guard_conn``).

Memory comes back after a flood: once the open connections fall to half of their peak
(and the peak was at least ``TRIM_AFTER``), the freed heap is handed back to the system
(glibc's ``malloc_trim``; elsewhere nothing happens): the buffers of a thousand
connections otherwise stay in the process as free heap.

The count is released when the socket is closed (asyncio closes it when the connection
ends), or at the latest when it is collected, so a leak in a protocol cannot leak the cap.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import socket
import ssl
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator
from typing import Any, Final, Protocol

from aiohttp import web
from aiohttp.typedefs import Middleware

from raftlog.observability.address_ranks import AddressRanks
from raftlog.observability.flood_log import REAP_INTERVAL, FloodLog
from raftlog.observability.guard_conn import CountedSocket, GuardedConn, Slot
from raftlog.server.process_memory import heap_trimmer

ACCEPT_PAUSE: Final = 0.1
"""Seconds accepting pauses after accept failed for lack of descriptors or memory."""
ACCEPT_BATCH: Final = 64
"""Connections accepted per readiness event before other work gets the loop."""
BACKLOG: Final = 128
REFUSAL: Final = (
    b"HTTP/1.1 503 Service Unavailable\r\nRetry-After: 1\r\nContent-Length: 0\r\n"
    b"Connection: close\r\n\r\n"
)
TRIM_AFTER: Final = 64
"""Peak connections after which a fall to half of them returns freed heap to the system."""
_RESOURCE_ERRORS: Final = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})


class ListenerLimits(Protocol):
    """What a listener's settings say about its connections (``HttpSettings``,
    ``KafkaSettings``)."""

    @property
    def max_connections_per_address(self) -> int:
        """Connections open at once from one source address."""

    @property
    def header_timeout_ms(self) -> int:
        """A new connection (or TLS handshake) must complete a request by then."""

    @property
    def idle_timeout_ms(self) -> int:
        """A connection without a request for this long is closed."""

    @property
    def send_timeout_ms(self) -> int:
        """A connection whose client takes none of its pending output for this long is
        aborted (``raftlog.observability.guard_conn``)."""

    def connection_cap(self, nofile: int | None = None) -> int:
        """Connections admitted at once, within the listener's share of descriptors."""

class ConnectionGuard:
    """Accepts for a listener within the limits of ``settings`` (module docstring); its log
    events are named ``{name}_...``; ``refusal`` is written to a refused plaintext
    connection before it is closed (None: closed without a word)."""

    def __init__(self, settings: ListenerLimits, ssl_context: ssl.SSLContext | None = None,
                 *, nofile: int | None = None, name: str = "http",
                 refusal: bytes | None = REFUSAL) -> None:
        self.settings = settings
        self.name = name
        self._refusal = refusal
        self.ssl_context = ssl_context
        self.cap = settings.connection_cap(nofile)
        """Connections admitted at once (``max_connections`` bounded by the fd share)."""
        self.flood = FloodLog()
        self.open = 0
        self._per_address: Counter[str] = Counter()
        self._conns: dict[GuardedConn, None] = {}
        """Admitted connections not yet evicted or reaped, oldest first (an ordered set)."""
        self._ranks: AddressRanks[GuardedConn] = AddressRanks()
        """The same connections by client address, for eviction."""
        self._by_transport: dict[asyncio.BaseTransport, GuardedConn] = {}
        self._sock: socket.socket | None = None
        self._factory: Callable[[], asyncio.BaseProtocol] | None = None
        self._reaper: asyncio.Task[None] | None = None
        self._paused = False
        self._peak = 0
        self._trim = heap_trimmer()

    # -- listening ---------------------------------------------------------------------------
    def listen(self, factory: Callable[[], asyncio.BaseProtocol], host: str, port: int) -> int:
        """Bind ``host:port`` and start accepting for ``factory`` (on the running loop);
        the bound port."""
        family, kind, proto, _, address = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
        sock = socket.socket(family, kind, proto)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind(address)
            sock.listen(BACKLOG)
            sock.setblocking(False)
        except BaseException:
            sock.close()
            raise
        self._sock, self._factory = sock, factory
        loop = asyncio.get_running_loop()
        loop.add_reader(sock.fileno(), self._accept)
        self._reaper = loop.create_task(self._reap_forever())
        return int(sock.getsockname()[1])

    def close(self) -> None:
        """Stop accepting and cancel handshakes in progress (established connections are
        aiohttp's to close)."""
        if self._sock is not None:
            with contextlib.suppress(RuntimeError):  # the loop may already be closing
                asyncio.get_running_loop().remove_reader(self._sock.fileno())
            self._sock.close()
            self._sock = None
        for conn in self._conns:
            if conn.transport is None and conn.task is not None:
                conn.task.cancel()
        if self._reaper is not None:
            self._reaper.cancel()
        self.flood.flush()

    def _accept(self) -> None:
        sock = self._sock
        if sock is None:
            return
        for _ in range(ACCEPT_BATCH):
            try:
                conn, peer = sock.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:
                self.flood.event(f"{self.name}_accept_failed", error=exc.strerror or str(exc))
                if exc.errno in _RESOURCE_ERRORS:
                    self._pause()
                return
            self._admit(conn, str(peer[0]) if isinstance(peer, tuple) else "local")

    def _pause(self) -> None:
        if self._paused or self._sock is None:
            return
        self._paused = True
        loop = asyncio.get_running_loop()
        loop.remove_reader(self._sock.fileno())

        def resume() -> None:
            self._paused = False
            if self._sock is not None:
                loop.add_reader(self._sock.fileno(), self._accept)

        loop.call_later(ACCEPT_PAUSE, resume)

    def _admit(self, sock: socket.socket, address: str) -> None:
        limits = self.settings
        if self._per_address[address] >= limits.max_connections_per_address:
            self._refuse(sock, f"{self.name}_connections_refused", reason="address full",
                         address=address, cap=limits.max_connections_per_address)
            return
        if self.open >= self.cap and not self._evict_one():
            self._refuse(sock, f"{self.name}_connections_refused",
                         reason="every connection busy",
                         cap=self.cap)
            return
        self.open += 1
        self._per_address[address] += 1
        conn = GuardedConn(time.monotonic(), address)
        self._conns[conn] = None
        self._ranks.add(address, conn)

        def release() -> None:
            self.open -= 1
            self._forget(conn)
            if conn.transport is not None:
                self._by_transport.pop(conn.transport, None)
            left = self._per_address[address] - 1
            if left > 0:
                self._per_address[address] = left
            else:
                del self._per_address[address]

        counted = CountedSocket(sock, Slot(release))
        conn.task = asyncio.get_running_loop().create_task(self._connect(counted, conn))

    def _forget(self, conn: GuardedConn) -> None:
        """Stop tracking ``conn`` (evicted, reaped or closed); safe to repeat."""
        self._conns.pop(conn, None)
        self._ranks.discard(conn.address, conn)

    def _victim(self) -> GuardedConn | None:
        """The connection a new one displaces: the oldest idle one of the address holding
        the most connections, else the oldest idle one of any address; None if all are
        busy. Fairness by address, so that a flood's own connections go first."""
        for candidates in (self._ranks.most_crowded(), self._conns):
            for conn in candidates:
                if not conn.busy:
                    return conn
        return None

    def _evict_one(self) -> bool:
        """Drop the connection :meth:`_victim` picks; False if all are busy. Its slot comes
        back when its socket closes, on the loop's next pass: until then ``open`` may pass
        ``cap`` by the connections of one accept batch (``ACCEPT_BATCH``)."""
        conn = self._victim()
        if conn is None:
            return False
        self._forget(conn)  # never picked twice; release() tolerates it
        conn.drop()
        self.flood.event(f"{self.name}_connections_evicted", reason="listener full",
                         cap=self.cap)
        return True

    def _refuse(self, conn: socket.socket, event: str, **fields: Any) -> None:
        """Answer the refusal without reading the request (plaintext only) and close."""
        try:
            if self.ssl_context is None and self._refusal is not None:
                conn.setblocking(False)
                conn.send(self._refusal)
        except OSError:
            pass
        finally:
            conn.close()
        self.flood.event(event, **fields)

    async def _connect(self, sock: CountedSocket, conn: GuardedConn) -> None:
        assert self._factory is not None
        loop = asyncio.get_running_loop()
        handshake = self.settings.header_timeout_ms / 1000 if self.ssl_context else None
        try:
            transport, _ = await loop.connect_accepted_socket(
                self._factory, sock, ssl=self.ssl_context, ssl_handshake_timeout=handshake
            )
        except asyncio.CancelledError:
            sock.close()  # evicted or shut down during the handshake
            return
        except (OSError, ssl.SSLError, TimeoutError, ConnectionError) as exc:
            sock.close()  # asyncio closed its transport; this releases an unwrapped socket
            self.flood.event(f"{self.name}_handshake_failed", error=type(exc).__name__)
            return
        conn.task = None
        if conn not in self._conns:  # evicted while the handshake completed
            transport.abort()
        else:
            conn.transport = transport
            self._by_transport[transport] = conn

    # -- reaping -----------------------------------------------------------------------------
    def reap(self, now: float) -> int:
        """Drop connections past their header or idle deadline (a handshake past the
        header deadline too), and those whose client stopped taking their output; the
        number dropped."""
        header = self.settings.header_timeout_ms / 1000
        idle = self.settings.idle_timeout_ms / 1000
        send = self.settings.send_timeout_ms / 1000
        stalled: list[GuardedConn] = []
        late: list[GuardedConn] = []
        for conn in self._conns:
            if conn.write_stalled(now, send):
                stalled.append(conn)
            elif conn.pending:  # still sending an answer: not idle, however long it takes
                conn.last = now
            elif not conn.busy and now - conn.last > (idle if conn.requests else header):
                late.append(conn)
        for conn in (*late, *stalled):
            self._forget(conn)
            conn.drop()
        if late:
            self.flood.event(f"{self.name}_connections_reaped", count_now=len(late))
        if stalled:
            self.flood.event(f"{self.name}_connections_stalled", count_now=len(stalled))
        return len(late) + len(stalled)

    async def _reap_forever(self) -> None:
        while True:
            await asyncio.sleep(REAP_INTERVAL)
            self.reap(time.monotonic())
            self.flood.flush()
            self._after_flood()

    def _after_flood(self) -> None:
        """Return freed heap once the connections fell to half their peak (docstring)."""
        self._peak = max(self._peak, self.open)
        if self._peak >= TRIM_AFTER and self.open <= self._peak // 2:
            self._peak = self.open
            self._trim()

    def middleware(self) -> Middleware:
        """Marks a connection busy while one of its requests is handled, so a long poll is
        never reaped, and restarts its idle clock when the request ends."""

        @web.middleware
        async def track(
            request: web.Request,
            handler: Callable[[web.Request], Awaitable[web.StreamResponse]],
        ) -> web.StreamResponse:
            with self.handling(request.transport):
                return await handler(request)

        return track

    @contextlib.contextmanager
    def handling(self, transport: asyncio.BaseTransport | None) -> Iterator[None]:
        """While a request of ``transport``'s connection is handled: it is busy (never
        reaped nor evicted, e.g. a long poll or a Fetch that waits), and its idle clock
        restarts when the request ends."""
        conn = self._by_transport.get(transport) if transport is not None else None
        if conn is None:
            yield
            return
        conn.busy += 1
        conn.requests += 1
        try:
            yield
        finally:
            conn.busy -= 1
            conn.last = time.monotonic()

    def loop_errors(self, _loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        """The listener loop's exception handler: errors asyncio reports about single
        connections (a reset during a handshake, a failed write) counted and logged once a
        second, without a traceback each."""
        exc = context.get("exception")
        self.flood.event(
            f"{self.name}_loop_error",
            message=str(context.get("message", "")),
            error="" if exc is None else f"{type(exc).__name__}: {exc}"[:200],
        )
