"""Counts the TCP connections on a peer's ROUTER from its ZeroMQ socket-monitor events.

Why the socket monitor rather than the dispatcher's view of routing ids: a ROUTER hides
connections -- a client that connects and never sends, or one whose connection dropped, is
invisible to the dispatcher, and a routing id says nothing about when it went away. libzmq
reports every accepted and closed connection as an event on a PAIR socket; a small daemon
thread reads them, so the consensus loop does no work for it. The counts include the other
peers' channels and their status pollers (a ROUTER cannot tell them from clients); on a
healthy cluster of N members that is about 2 x (N - 1) connections besides the clients.
"""

from __future__ import annotations

import contextlib
import threading
import time
from typing import Final, Protocol

import zmq
from zmq.utils.monitor import parse_monitor_message

from raftlog import sockets
from raftlog.metrics import PeerMetrics

ROUTER_EVENTS: Final = zmq.EVENT_ACCEPTED | zmq.EVENT_DISCONNECTED | zmq.EVENT_MONITOR_STOPPED
POLL_MS: Final = 200
"""How often the thread looks at its stop flag when no event comes."""
BACKLOG_POLL_MS: Final = 20
"""The same with a backlog check to run (``raftlog.server.backlog``)."""


class ConnectionListener(Protocol):
    """Told of each connection's descriptor, and ticked, on the monitor thread."""

    def accepted(self, fd: int) -> None:
        """A connection was accepted on ``fd``."""
        ...

    def closed(self, fd: int) -> None:
        """The connection on ``fd`` is gone."""
        ...

    def tick(self, now: float) -> None:
        """Called at least every ``BACKLOG_POLL_MS``."""
        ...


class ConnectionMonitor:
    """Feeds ``client_connections`` / ``client_connects`` / ``client_disconnects``.

    Created and stopped from the loop's thread (``router`` is the loop's socket: only
    ``monitor``/``disable_monitor`` touch it, before and after the thread runs); the PAIR
    socket is used by the monitor thread alone."""

    def __init__(
        self,
        router: zmq.Socket[bytes],
        metrics: PeerMetrics | None,
        listener: ConnectionListener | None = None,
        *,
        name: str = "raftlog-router-monitor",
        ticks: bool = True,
    ) -> None:
        self._router = router
        self._listener = listener
        self._ticks = ticks
        """Whether ``listener`` is ticked every ``BACKLOG_POLL_MS`` (its backlog scans); a
        listener for the caps alone (the PUB's) only hears of connections, and the thread
        wakes every ``POLL_MS``."""
        self._counted = metrics is not None
        """Whether the events feed the client connection metrics (the ROUTER's do; the
        PUB broadcast's only its caps)."""
        if metrics is not None:
            self._open = metrics.client_connections.labels()
            self._connects = metrics.client_connects.labels()
            self._disconnects = metrics.client_disconnects.labels()
        self._pair: zmq.Socket[bytes] = sockets.connection_monitor(router, ROUTER_EVENTS)
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        pair = self._pair
        listener = self._listener
        tick = listener.tick if self._ticks and listener is not None else None
        poll_ms = POLL_MS if tick is None else BACKLOG_POLL_MS
        try:
            while not self._stopping.is_set():
                if tick is not None:
                    tick(time.monotonic())
                if not pair.poll(poll_ms):
                    continue
                message = parse_monitor_message(pair.recv_multipart())
                event = message["event"]
                if event == zmq.EVENT_MONITOR_STOPPED:
                    return
                self.on_event(event)
                if listener is not None and event == zmq.EVENT_ACCEPTED:
                    listener.accepted(int(message["value"]))
                elif listener is not None and event == zmq.EVENT_DISCONNECTED:
                    listener.closed(int(message["value"]))
        except zmq.ZMQError:
            return  # the context is going away: the peer is stopping
        finally:
            pair.close(linger=0)

    def on_event(self, event: int) -> None:
        """Count one monitor event (public for tests with fake events)."""
        if not self._counted:
            return
        if event == zmq.EVENT_ACCEPTED:
            self._connects.inc()
            self._open.inc()
        elif event == zmq.EVENT_DISCONNECTED:
            self._disconnects.inc()
            self._open.set(max(0.0, self._open.value - 1))

    def stop(self) -> None:
        """Stop the monitor and its thread (idempotent; before the ROUTER closes)."""
        if self._stopping.is_set():
            return
        self._stopping.set()
        if not self._router.closed:
            with contextlib.suppress(zmq.ZMQError):  # closed meanwhile: nothing to stop
                self._router.disable_monitor()
        self._thread.join(2 * POLL_MS / 1000)
