"""``build_peer()``: a peer's wiring, written once.

Opens the stores, the sockets, the state machines, the core, the services, the storage
thread and the Ready executor of one peer, in the order their dependencies need (security's
ZAP handler answers before any socket binds; the topic index catches up on the log before
the core starts; a non-member downloads the committed log before its ROUTER binds), and
hands them back grouped by what they are (``PeerParts``). ``PeerNode`` drives the result
with ``loop_step``; ``PeerNode`` no longer owns the wiring, so another driver (a test, a tool
opening a peer) gets the same parts from the same function.

What is opened is released in reverse order of opening (``Releases``) -- on ``close`` and when
the wiring fails half-way: the storage thread's write in flight finishes first, the ROUTER's
monitor goes before the ROUTER, the sockets before their contexts, the stores last.
"""

from __future__ import annotations

import functools
import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import zmq

from raftlog import sockets
from raftlog.config import PeerSettings
from raftlog.consensus import RaftCore
from raftlog.ids import RequestIdGenerator
from raftlog.log import get_logger
from raftlog.metrics import Counter, PeerMetrics
from raftlog.observability.peer_hook import PeerObserver
from raftlog.rpc.messages import ConfigPayload
from raftlog.security.peer import SecurePeer
from raftlog.server.catch_up import CatchUp
from raftlog.server.disk_guard import DiskGuard
from raftlog.server.interfaces import EventLog
from raftlog.server.peers import PeerChannels, PeerOutbox
from raftlog.server.reactions import PeerReactions
from raftlog.server.ready_executor import ReadyExecutor
from raftlog.server.router_limits import RouterLimits
from raftlog.server.services import Services, build_services, core_config
from raftlog.server.storage_thread import StorageThread, start_storage_thread
from raftlog.statemachine.broadcast import BroadcastStateMachine
from raftlog.statemachine.composite import CompositeStateMachine
from raftlog.storage.base import HardState
from raftlog.storage.bounds_check import check_durable_bounds
from raftlog.storage.durable_dirs import make_dirs
from raftlog.storage.ready_store import RocksReadyStore
from raftlog.storage.rocks import RocksHardStateStore, RocksLogStore, open_storage
from raftlog.storage.snapshot import FileSnapshotStore, check_snapshot_covers_log
from raftlog.topics.machine import TOPICS_DIR, TopicStateMachine
from raftlog.topics.opening import open_topic_machine

if TYPE_CHECKING:  # the HTTP stack only for types: imported when a listener mounts routes
    from aiohttp import web

    from raftlog.server.apply_signal import ApplySignal

Context = zmq.Context[zmq.Socket[bytes]]


class Releases:
    """Releases of what was opened, run newest first. Every release is tried even when one
    fails (a full disk fails the topic index's flush); the first error is raised after all
    of them, so the caller can report it without masking anything. Idempotent."""

    def __init__(self) -> None:
        self._releases: list[Callable[[], object]] = []

    def add(self, release: Callable[[], object]) -> None:
        """Release this (after everything opened later) on ``close``."""
        self._releases.append(release)

    def close(self) -> None:
        """Run every release, newest first; raise the first error."""
        errors: list[Exception] = []
        while self._releases:
            try:
                self._releases.pop()()
            except Exception as exc:  # collected; the first one is raised at the end
                errors.append(exc)
        if errors:
            raise errors[0]


@dataclass(eq=False)
class PeerStores:
    """The peer's durable state, opened together and closed last."""

    log: RocksLogStore
    hard_state: RocksHardStateStore
    snapshots: FileSnapshotStore


@dataclass(eq=False)
class PeerSockets:
    """The peer's ØMQ side: the ROUTER (peers and clients), one DEALER per other peer on a
    context of its own (own I/O thread, issue #25), the poller over both, CURVE when secure."""

    context: Context
    peer_context: Context
    poller: zmq.Poller
    router: zmq.Socket[bytes]
    channels: PeerChannels
    secure: SecurePeer | None


@dataclass(eq=False)
class PeerMachines:
    """The state machines: the broadcast (PUB) machine and the topic index, applied as one."""

    broadcast: BroadcastStateMachine
    topics: TopicStateMachine
    machine: CompositeStateMachine


@dataclass(eq=False)
class PeerParts:
    """Everything ``build_peer`` wired, grouped; ``releases.close()`` lets it all go."""

    metrics: PeerMetrics
    log: EventLog
    stores: PeerStores
    machines: PeerMachines
    sockets: PeerSockets
    core: RaftCore
    services: Services
    executor: ReadyExecutor
    storage: StorageThread | None
    """The storage thread (``storage_thread`` option), whose pipe wakes the poller."""
    observer: PeerObserver
    disk: DiskGuard
    limits: RouterLimits
    releases: Releases


def build_peer(settings: PeerSettings, *, stop: Callable[[], None]) -> PeerParts:
    """Open and wire one peer (see the module docstring); ``stop`` is what a removed peer
    calls to end its loop. Everything opened is released again when this fails."""
    releases = Releases()
    try:
        return _build(settings, stop, releases)
    except BaseException:
        releases.close()
        raise


def _build(settings: PeerSettings, stop: Callable[[], None], releases: Releases) -> PeerParts:
    opts = settings.options
    metrics = PeerMetrics()
    log = get_logger(peer_id=settings.id)
    limits = RouterLimits(opts, metrics, log, owner=settings.id)  # issue #25
    observer = PeerObserver(settings, metrics)  # metrics, views, HTTP listener
    stores, saved = _open_stores(settings, releases)
    context, peer_context, secure = _open_contexts(settings, metrics, releases)
    machines = _open_machines(
        settings, context, stores, saved, log=log, releases=releases,
        on_pub_bound=lambda pub: observer.watch_broadcast(pub, limits.broadcast),
    )
    if not settings.is_member and opts.catch_up_timeout:
        saved = _catch_up(settings, stores, machines.machine, log)
    poller = zmq.Poller()
    curve = settings.security
    router = sockets.peer_router(
        context, settings.bind_url, max_message_size=limits.message_limit,
        curve=curve.server if curve else None, keepalive=sockets.served_keepalive(opts),
    )
    releases.add(lambda: router.close(linger=0))
    observer.watch_connections(router, limits.backlog)  # before any client
    poller.register(router, zmq.POLLIN)
    core = RaftCore(
        core_config(settings), stores.log, stores.snapshots, saved,
        seed_config=ConfigPayload(new=settings.peers), rng=random.Random(),
        new_request_id=RequestIdGenerator().next,
    )
    channels = PeerChannels(
        peer_context, settings.id, settings.ident.encode(), opts.rpc_timeout, poller,
        curve=curve.client if curve else None, metrics=metrics, log=log,
    )
    releases.add(channels.close)
    releases.add(observer.close)  # its ROUTER monitor goes before the ROUTER
    channels.reconcile(core.connect_to())
    disk = DiskGuard(settings.data_dir, opts.min_free_disk_bytes, log)
    services = build_services(
        ident=settings.ident.encode(), pub_url=settings.pub_url, options=opts, router=router,
        core=core, store=stores.log, snapshots=stores.snapshots, machine=machines.machine,
        topics=machines.topics, metrics=metrics, log=log, disk=disk,
        channels=channels,  # a follower's RI to the leader (#29)
        answers=limits.answers,  # what each client leaves of its answers unread
    )
    storage = None
    if opts.storage_thread:
        storage = start_storage_thread(stores.log, stores.hard_state, metrics)
        releases.add(storage.close)  # the write in flight finishes; nothing waits for it
        poller.register(storage.fd, zmq.POLLIN)
    peer_sockets = PeerSockets(context, peer_context, poller, router, channels, secure)
    react = PeerReactions(
        observer=observer, clients=services.clients, entries=services.entries,
        channels=channels, machine=machines.machine, store=stores.log, metrics=metrics,
        log=log, exit_when_removed=opts.exit_when_removed, stop=stop,
        on_read_event=services.info.reads.on_event,  # ReadIndex answers (#29)
    )
    executor = _executor(
        stores, machines, services=services, observer=observer, channels=channels,
        storage=storage, react=react,
    )
    executor.core = core
    observer.applied.listen(services.info.on_applied)  # parked TR reads (wait)
    limits.install_quotas(settings, secure, services.entries, services.info.parked)
    rest_api = functools.partial(_mount_rest, settings=settings, applied=observer.applied,
                                 quota_refusals=metrics.quota_refusals)
    observed = (core, services.clients, services.entries, machines.topics, disk)
    observer.start(*observed, links=channels, mount=rest_api)  # the peer's routes: REST (#26)
    if settings.kafka is not None:  # kafka_url (#30); imported only then: kio's message
        from raftlog.kafka.listener import start_kafka  # noqa: PLC0415  types take ~1.5 s

        kafka = start_kafka(settings, observer.applied, observer.views)
        if kafka is not None:
            releases.add(kafka.stop)  # first to stop: no fetch waits on a closing peer
            for collector in kafka.collectors():  # raftlog_kafka_connections... in /metrics
                observer.expose(collector)
    return PeerParts(
        metrics, log, stores, machines, peer_sockets, core, services, executor, storage,
        observer, disk, limits, releases,
    )


def _mount_rest(
    root: web.Application, settings: PeerSettings, applied: ApplySignal, quota_refusals: Counter
) -> None:
    """The REST API's routes (issue #26), imported when the HTTP listener mounts them: a
    peer without ``http_url`` never loads aiohttp (~0.2 s of every start)."""
    from raftlog.rest import app as rest  # noqa: PLC0415

    rest.mount(root, settings=settings, applied=applied, quota_refusals=quota_refusals)


def _open_contexts(
    settings: PeerSettings, metrics: PeerMetrics, releases: Releases
) -> tuple[Context, Context, SecurePeer | None]:
    """The client-side context (ROUTER, PUB, ZAP), the peers' own context (own I/O thread,
    issue #25), and a secure peer's ZAP handler, started before any socket binds."""
    context: Context = zmq.Context()
    peer_context: Context = zmq.Context()
    releases.add(lambda: peer_context.destroy(linger=0))  # closes what a failure left open
    releases.add(lambda: context.destroy(linger=0))
    secure = None
    if settings.security is not None:  # ZAP must answer before any socket binds
        secure = SecurePeer(context, settings.security, metrics, owner=settings.id)
        releases.add(secure.close)
        secure.start()
    return context, peer_context, secure


def _executor(
    stores: PeerStores,
    machines: PeerMachines,
    *,
    services: Services,
    observer: PeerObserver,
    channels: PeerChannels,
    storage: StorageThread | None,
    react: PeerReactions,
) -> ReadyExecutor:
    """The peer's ``ReadyExecutor``: the stores, the machines and the outbox, each seen by
    the observer (write timings, snapshot receipt, messages sent, applied counts)."""
    return ReadyExecutor(
        log=stores.log,
        hard_state=stores.hard_state,
        snapshots=observer.receiving(stores.snapshots),
        ready_store=observer.timed(RocksReadyStore(stores.log, stores.hard_state)),
        machine=machines.machine,
        outbox=observer.sending(PeerOutbox(channels, services.peers.send_reply)),
        writes=storage,
        on_applied=observer.counting(services.clients.on_applied, machines.machine.last_applied),
        on_committed=services.clients.on_committed,
        react=react,
    )


def _open_stores(settings: PeerSettings, releases: Releases) -> tuple[PeerStores, HardState]:
    """The log, hard state and snapshots, checked against each other (never a crash loop
    on a store a previous run left inconsistent); the hard state as saved."""
    make_dirs(settings.data_dir)
    store, hard_state, snapshots = open_storage(
        settings.data_dir, max_entry_data_size=settings.options.max_log_entry_data_size
    )
    releases.add(snapshots.close)
    releases.add(hard_state.close)
    releases.add(store.close)
    saved = hard_state.load()
    check_durable_bounds(settings.data_dir, saved, store)
    check_snapshot_covers_log(settings.data_dir, store, snapshots)
    store.set_commit_floor(saved.last_applied)
    return PeerStores(store, hard_state, snapshots), saved


def _open_machines(
    settings: PeerSettings, context: Context, stores: PeerStores, saved: HardState,
    *, log: EventLog, releases: Releases,
    on_pub_bound: Callable[[zmq.Socket[bytes]], None] | None = None,
) -> PeerMachines:
    """The broadcast machine, then the topic index (issue #7) brought up to the persisted
    last_applied from the log first (its own writes are unsynced), applied as one."""
    last_applied = max(saved.last_applied, stores.log.snapshot_index)
    broadcast = BroadcastStateMachine(
        context,
        ident=settings.ident.encode(),
        pub_url=settings.pub_url,
        bind_url=settings.pub_bind_url,
        last_applied=last_applied,
        heartbeat_interval_ms=settings.options.broadcast_heartbeat_interval,
        curve=settings.security.server if settings.security else None,
        connection_keepalive=sockets.served_keepalive(settings.options),
        on_bound=on_pub_bound,
    )
    # the composite once built; before that (the topic index failed to open) the broadcast
    # machine alone holds a socket
    built: list[CompositeStateMachine] = []

    def close_machines() -> None:
        (built[0] if built else broadcast).close()

    releases.add(close_machines)
    topics = open_topic_machine(
        settings.data_dir / TOPICS_DIR, stores.log, stores.snapshots, last_applied, log=log
    )
    built.append(CompositeStateMachine([broadcast, topics]))
    return PeerMachines(broadcast, topics, built[0])


def _catch_up(
    settings: PeerSettings, stores: PeerStores, machine: CompositeStateMachine, log: EventLog
) -> HardState:
    """§12.5: download the committed log before serving (see ``catch_up``)."""
    catcher = CatchUp(
        stores.log,
        stores.hard_state,
        stores.snapshots,
        machine,
        RocksReadyStore(stores.log, stores.hard_state),
    )
    catcher.run_for_peer(settings, log)
    saved = stores.hard_state.load()
    stores.log.set_commit_floor(saved.last_applied)
    return saved
