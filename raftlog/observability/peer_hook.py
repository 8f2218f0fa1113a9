"""``PeerObserver``: everything monitoring needs from a running peer, in one object.

Why one object: ``PeerNode`` is the consensus driver and stays small; it hands this
observer its parts once and calls it at three points (each timer pass, each role change,
close). The observer wraps the synced write, the applied callback, the executor's snapshot
store and outbox with their metrics, keeps the ring of recent leader changes, counts the
ROUTER's connections, publishes the :class:`PeerView` at most every 200 ms, and runs the
HTTP listener when the peer has an ``http_url``, and notifies the HTTP side's waits
(:class:`~raftlog.server.apply_signal.ApplySignal`) after each applied batch.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING

import zmq

from raftlog.config import PeerSettings, split_http_url
from raftlog.consensus import Role, SoftState
from raftlog.metrics import PeerMetrics
from raftlog.observability.build import (
    CoreReadings,
    DiskReadings,
    OpenStreams,
    PeerLinks,
    PendingUpdates,
    TopicCatalog,
    build_peer_view,
)
from raftlog.observability.connections import ConnectionListener, ConnectionMonitor
from raftlog.observability.elections import ElectionLog
from raftlog.observability.probes import (
    ReceivedSnapshots,
    SentSnapshots,
    TimedReadyStore,
    counting_applied,
)
from raftlog.observability.view import ViewBox, ViewPublisher
from raftlog.server.apply_signal import ApplySignal
from raftlog.server.ready_executor import Outbox
from raftlog.storage.base import ReadyStore, SnapshotStore

if TYPE_CHECKING:  # the HTTP stack (aiohttp) is imported only by a peer that serves HTTP
    from aiohttp import web
    from prometheus_client.registry import Collector

    from raftlog.observability.http import HttpListener


class PeerObserver:
    """The monitoring side of one peer (see the module docstring)."""

    def __init__(self, settings: PeerSettings, metrics: PeerMetrics) -> None:
        self.settings = settings
        self.metrics = metrics
        self.views = ViewBox()
        """The latest ``PeerView`` (published by the loop, read by the HTTP listener)."""
        self.elections = ElectionLog(settings.id)
        """The last leader changes this peer lived through (published with the view)."""
        self.applied = ApplySignal()
        """This peer's applied index for the HTTP side's waits (long polls, catch-up)."""
        self._publisher: ViewPublisher | None = None
        self._http: HttpListener | None = None
        self._connections: ConnectionMonitor | None = None
        self._broadcast: ConnectionMonitor | None = None

    def timed(self, store: ReadyStore) -> ReadyStore:
        """``store`` with its synced writes timed and counted."""
        return TimedReadyStore(store, self.metrics)

    def counting(self, on_applied: Callable[[int], None], applied: int) -> Callable[[int], None]:
        """``on_applied`` that also counts applied entries (from ``applied``) and then
        notifies :attr:`applied` (what wakes waiting long polls)."""
        counted = counting_applied(on_applied, self.metrics, applied)
        signal = self.applied
        signal.notify(applied)

        def wrapped(index: int) -> None:
            counted(index)
            signal.notify(index)

        return wrapped

    def watch_connections(
        self, router: zmq.Socket[bytes], listener: ConnectionListener | None = None
    ) -> None:
        """Count ``router``'s TCP connections from now on (call right after it is bound);
        ``listener`` also learns each connection's descriptor (``raftlog.server.backlog``)."""
        if self._connections is None:
            self._connections = ConnectionMonitor(router, self.metrics, listener)

    def watch_broadcast(self, pub: zmq.Socket[bytes], listener: ConnectionListener) -> None:
        """Tell ``listener`` (the PUB's caps, ``RouterLimits.broadcast``) of each connection
        to the PUB broadcast ``pub`` from now on (call right after it is bound)."""
        if self._broadcast is None:
            self._broadcast = ConnectionMonitor(pub, None, listener, ticks=False,
                                                name="raftlog-broadcast-monitor")

    def receiving(self, snapshots: SnapshotStore) -> SnapshotStore:
        """The executor's snapshot store, counting the snapshots received from a leader."""
        return ReceivedSnapshots(snapshots, self.metrics)

    def sending(self, outbox: Outbox) -> Outbox:
        """The executor's outbox, counting the snapshots sent to followers."""
        return SentSnapshots(outbox, self.metrics)

    def start(
        self,
        core: CoreReadings,
        clients: PendingUpdates,
        entries: OpenStreams,
        topics: TopicCatalog,
        disk: DiskReadings | None = None,
        *,
        links: PeerLinks | None = None,
        mount: Callable[[web.Application], None] | None = None,
    ) -> None:
        """Publish the first view and start the listener (``ListenerError`` if its port
        cannot be bound). ``mount`` adds the peer's other HTTP routes (the REST API): the
        peer's wiring chooses them, observability only serves them."""
        self._publisher = ViewPublisher(
            self.views,
            lambda: build_peer_view(
                core, clients, entries, topics, self.elections, disk=disk, links=links
            ),
        )
        self._publisher.maybe_publish(time.monotonic())
        settings = self.settings
        if settings.http_url is not None:
            # imported here: ~0.2 s of aiohttp a peer without http_url never pays
            from raftlog.observability.http import start_listener  # noqa: PLC0415

            host, port = split_http_url(settings.http_url)
            self._http = start_listener(
                host,
                port,
                self.views,
                self.metrics.registry,
                settings.data_dir,
                ident=settings.ident,
                http_urls=dict(settings.peer_http_urls),
                curve=None if settings.security is None else settings.security.client,
                ready_max_lag=settings.ready_max_lag,
                mount=mount,
                limits=settings.http,
                security=settings.security,
                tls=settings.http_url.startswith("https:"),
            )

    def expose(self, collector: Collector) -> None:
        """Another listener's metrics in ``/metrics`` (no-op without ``http_url``): the
        Kafka listener starts after this one."""
        if self._http is not None:
            self._http.expose(collector)

    def on_timer(self, now: float) -> None:
        """Each timer pass of the loop: a fresh view if the last one is old enough."""
        if self._publisher is not None:
            self._publisher.maybe_publish(now)

    def on_soft_state(self, soft: SoftState, was_leader: bool) -> None:
        """A Ready's soft state (role, leader or term changed): count elections started
        and won, remember the leader change."""
        role = soft.role
        if role is Role.CANDIDATE:
            self.metrics.elections_started.inc()
        elif role is Role.LEADER and not was_leader:
            self.metrics.elections_won.inc()
        self.elections.on_soft_state(role, soft.leader_id, soft.term)

    def on_stepped_down(self, term: int, reason: str) -> None:
        """This leader stepped down (the ``SteppedDown`` event's reason)."""
        self.elections.on_stepped_down(term, reason)

    def close(self) -> None:
        """Stop the connection monitor and the listener (idempotent; before the ROUTER
        closes)."""
        if self._connections is not None:
            self._connections.stop()
            self._connections = None
        if self._broadcast is not None:
            self._broadcast.stop()
            self._broadcast = None
        if self._http is not None:
            self._http.stop()
            self._http = None
