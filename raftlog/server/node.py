"""``PeerNode``: the thin driver that owns one peer's consensus core, sockets and stores.

One thread, one ``zmq.Poller`` loop (measured: blocking pyzmq sockets driven by a poller move
~4x the messages of ``zmq.asyncio`` on this class of machine, and the hot path -- ROUTER in,
propose, append, replicate, reply -- is all socket work). Each pass of the loop:

1. drains every readable socket (ROUTER: peers and clients; one DEALER per other peer) and
   steps what arrived into the core -- so everything that queued up while the previous fsync
   ran is proposed together and written by the next single fsync (group commit);
2. ticks the core for the wall time that passed (``tick_ms`` per tick);
3. runs the timers (broadcast heartbeat, RequestEntries expiry, id pruning, compaction);
4. carries out the core's Readies with ``ReadyExecutor`` -- the one place where the order
   send -> write -> reply once durable -> apply lives (the simulator and the catch-up use it
   too); with ``storage_thread`` the write runs on ``StorageThread`` (its pipe wakes the poller);
5. gives RequestEntries streaming a slice of at most ``ENTRIES_BUDGET`` (batches are never
   sent from the message handler: a burst of streams must not hold back heartbeats).

Every pass is timed (``stall``, a ``LoopStallMeter``): ``stall.max_ms`` keeps the longest,
and a pass longer than a quarter of the minimum election timeout is counted and logged
sampled, split into its phases (issue #12, finding 4).

Nothing a network sends can stop the loop: malformed messages raise ``RemoteProtocolError``
in the codec and are counted, logged and dropped. A storage failure (full disk, I/O error)
does stop the peer (exit code 3): it can no longer keep the promises its replies make, and a
crash-stop is the failure Raft tolerates; the store itself stays consistent.
"""

from __future__ import annotations

import functools
import random
import time
from collections.abc import Callable
from typing import Any, Final

import zmq

from raftlog import sockets
from raftlog.config import PeerSettings
from raftlog.consensus import (
    BadConfigEntry,
    ConfigChangeCompleted,
    ConfigChanged,
    RaftCore,
    Ready,
    Role,
    SnapshotInstall,
    SteppedDown,
    TruncationRefused,
)
from raftlog.errors import ConfigError
from raftlog.ids import RequestIdGenerator
from raftlog.log import get_logger
from raftlog.metrics import PeerMetrics
from raftlog.observability.peer_hook import PeerObserver
from raftlog.rest import app as rest
from raftlog.rpc.messages import ConfigPayload
from raftlog.rpc.ranges import OutOfRangeError
from raftlog.security.peer import SecurePeer
from raftlog.server.catch_up import CatchUp
from raftlog.server.disk_guard import DiskGuard
from raftlog.server.loop_health import LoopStallMeter, react_to_guard_event
from raftlog.server.peers import PeerChannels, PeerOutbox
from raftlog.server.ready_executor import ReadyExecutor
from raftlog.server.router_limits import RouterLimits
from raftlog.server.services import build_services, core_config
from raftlog.server.storage_thread import StorageThread, start_storage_thread
from raftlog.statemachine.broadcast import BroadcastStateMachine
from raftlog.statemachine.composite import CompositeStateMachine
from raftlog.storage.base import HardState
from raftlog.storage.bounds_check import check_durable_bounds
from raftlog.storage.durable_dirs import make_dirs
from raftlog.storage.ready_store import RocksReadyStore
from raftlog.storage.rocks import check_snapshot_covers_log, open_storage
from raftlog.topics.machine import TOPICS_DIR
from raftlog.topics.opening import open_topic_machine
from raftlog.transport import recv_frames

DRAIN_LIMIT: Final = 4096
"""Messages taken from one socket per pass, so one busy socket cannot starve the others."""
DRAIN_BUDGET: Final = 0.005
"""Seconds of ROUTER work per pass at least, before ticks and Readies get their turn."""
ENTRIES_BUDGET: Final = 0.005
"""Seconds of RequestEntries streaming per pass at most (one batch per due stream in turn)."""
HOUSEKEEPING_INTERVAL: Final = 1.0
MAX_TICK_BACKLOG: Final = 100
"""Ticks replayed at most after a stall (e.g. a very slow fsync); the rest are skipped."""


class PeerNode:
    """A running peer. ``run()`` blocks until ``stop()`` (e.g. from a signal handler)."""

    def __init__(self, settings: PeerSettings) -> None:
        self.settings = settings
        self.metrics = PeerMetrics()
        opts = settings.options
        self.log = get_logger(peer_id=settings.id)
        self._ident = settings.ident.encode()
        self._stopping = False
        self._reload_requested = False
        self._tick_s = opts.tick_ms / 1000.0
        self.limits = RouterLimits(opts, self.metrics, self.log, owner=settings.id)  # #25
        make_dirs(settings.data_dir)
        self.store, self.hard_state, self.snapshots = open_storage(
            settings.data_dir, max_entry_data_size=opts.max_log_entry_data_size
        )
        self._context: zmq.Context[zmq.Socket[bytes]] = zmq.Context()
        self._peer_context: zmq.Context[zmq.Socket[bytes]] = zmq.Context()  # own I/O thread #25
        self._poller = zmq.Poller()
        self._sockets_open = False
        self.storage: StorageThread | None = None
        self.secure: SecurePeer | None = None
        self.observer = PeerObserver(settings, self.metrics)  # metrics, views, HTTP listener
        try:
            if settings.security is not None:  # ZAP must answer before any socket binds
                self.secure = SecurePeer(
                    self._context, settings.security, self.metrics, owner=settings.id
                )
                self.secure.start()
            self._open(settings)
        except BaseException:
            self.close()
            raise

    def _open(self, settings: PeerSettings) -> None:
        opts = settings.options
        saved = self.hard_state.load()
        check_durable_bounds(settings.data_dir, saved, self.store)  # never a crash loop
        check_snapshot_covers_log(settings.data_dir, self.store, self.snapshots)
        self.store.set_commit_floor(saved.last_applied)
        self.broadcast = BroadcastStateMachine(
            self._context,
            ident=self._ident,
            pub_url=settings.pub_url,
            bind_url=settings.pub_bind_url,
            last_applied=max(saved.last_applied, self.store.snapshot_index),
            heartbeat_interval_ms=opts.broadcast_heartbeat_interval,
            curve=settings.security.server if settings.security else None,
        )
        self._sockets_open = True
        # The topic index (issue #7), brought up to the persisted last_applied from the log
        # first (its own writes are unsynced), then applied beside the broadcast machine.
        self.topics = open_topic_machine(
            settings.data_dir / TOPICS_DIR,
            self.store,
            self.snapshots,
            max(saved.last_applied, self.store.snapshot_index),
            log=self.log,
        )
        self.machine = CompositeStateMachine([self.broadcast, self.topics])
        if not settings.is_member and opts.catch_up_timeout:
            saved = self._catch_up(settings)
        self.router = sockets.peer_router(
            self._context,
            settings.bind_url,
            max_message_size=self.limits.message_limit,
            curve=settings.security.server if settings.security else None,
        )
        self.observer.watch_connections(self.router, self.limits.backlog)  # before any client
        self._poller.register(self.router, zmq.POLLIN)
        self.core = RaftCore(
            core_config(settings),
            self.store,
            self.snapshots,
            saved,
            seed_config=ConfigPayload(new=settings.peers),
            rng=random.Random(),
            new_request_id=RequestIdGenerator().next,
        )
        self.channels = PeerChannels(
            self._peer_context, settings.id, self._ident, opts.rpc_timeout, self._poller,
            curve=settings.security.client if settings.security else None,
        )
        self.channels.reconcile(self.core.connect_to())
        self.disk = DiskGuard(settings.data_dir, opts.min_free_disk_bytes, self.log)
        services = build_services(
            ident=self._ident,
            pub_url=settings.pub_url,
            options=opts,
            router=self.router,
            core=self.core,
            store=self.store,
            snapshots=self.snapshots,
            machine=self.machine,
            topics=self.topics,
            metrics=self.metrics,
            log=self.log,
            disk=self.disk, channels=self.channels,  # a follower's RI to the leader (#29)
        )
        self.clients = services.clients
        self.info = services.info
        self._replies = services.replies
        self.entries = services.entries
        self.compaction = services.compaction
        self.topic_clock = services.topic_clock
        self.clock_watch = services.clock_watch
        self.dispatcher = services.dispatcher
        if opts.storage_thread:
            self.storage = start_storage_thread(self.store, self.hard_state, self.metrics)
            self._poller.register(self.storage.fd, zmq.POLLIN)
        self.executor = ReadyExecutor(
            log=self.store,
            hard_state=self.hard_state,
            snapshots=self.observer.receiving(self.snapshots),
            ready_store=self.observer.timed(RocksReadyStore(self.store, self.hard_state)),
            machine=self.machine,
            outbox=self.observer.sending(PeerOutbox(self.channels, services.peers.send_reply)),
            writes=self.storage,
            on_applied=self.observer.counting(self.clients.on_applied, self.machine.last_applied),
            react=self._react,
        )
        self.executor.core = self.core
        self.observer.applied.listen(self.info.on_applied)  # parked TR reads (wait)
        self.limits.install_quotas(settings, self.secure, self.entries, self.info.parked)
        self._was_leader = False
        self._next_housekeeping = 0.0
        stall_ms = opts.election_timeout_min / 4
        self.stall = LoopStallMeter(stall_ms, self.metrics, self.log, time.monotonic)
        """``stall.max_ms``: the longest single pass of the loop so far (issue #12)."""
        rest_api = functools.partial(rest.mount, settings=settings, applied=self.observer.applied,
                                     quota_refusals=self.metrics.quota_refusals)
        observed = (self.core, self.clients, self.entries, self.topics, self.disk)
        self.observer.start(*observed, mount=rest_api)  # the peer's routes: REST (#26)
        self.log.info(
            "peer_started", url=settings.url, bind=settings.bind_url, pub_url=settings.pub_url,
            data_dir=str(settings.data_dir), term=self.core.term, member=settings.is_member,
            first_index=self.store.first_index, last_index=self.store.last_index,
            last_applied=self.machine.last_applied,
        )

    def _catch_up(self, settings: PeerSettings) -> HardState:
        """§12.5: download the committed log before serving (see ``catch_up``)."""
        catcher = CatchUp(
            self.store,
            self.hard_state,
            self.snapshots,
            self.machine,
            RocksReadyStore(self.store, self.hard_state),
        )
        catcher.run_for_peer(settings, self.log)
        saved = self.hard_state.load()
        self.store.set_commit_floor(saved.last_applied)
        return saved

    # -- main loop -------------------------------------------------------------------------
    def stop(self) -> None:
        """Ask ``run`` to return after the current pass (safe from a signal handler)."""
        self._stopping = True

    def request_reload(self) -> None:
        """Ask the loop to re-read what can change without a restart (SIGHUP: the client
        allowlist of a secure peer). Only sets a flag: safe from a signal handler, and the
        reload itself runs between two passes of the loop, never inside one."""
        self._reload_requested = True

    def _reload(self) -> None:
        self._reload_requested = False
        if self.secure is None:
            self.log.info("reload_done", security="off")
            return
        try:
            admitted = self.secure.reload()
        except ConfigError as exc:  # keep the policy in force: a typo must not lock all out
            self.log.error("reload_failed", error=str(exc), kept="previous allowlist")
            return
        self.log.info("reload_done", keys_admitted=admitted)

    def run(self) -> None:
        """The loop (see the module docstring) until ``stop()``; logs the metric totals when it
        ends."""
        core = self.core
        next_tick = time.monotonic() + self._tick_s
        self._handle_ready()
        while not self._stopping:
            timeout_ms = max(0, int((next_tick - time.monotonic()) * 1000.0) + 1)
            if self.entries.has_due:
                timeout_ms = 0  # RequestEntries batches are waiting for their slice
            ready_sockets = self._poller.poll(timeout_ms)
            self.stall.start()
            for socket, _ in ready_sockets:  # peer traffic first: it keeps the cluster alive
                if isinstance(socket, int) and self.storage is not None:  # a write is durable
                    self.storage.clear_wakeup()
                elif socket is not self.router:
                    self._drain_peer(socket)
            if ready_sockets:
                self._drain_router(time.monotonic() + DRAIN_BUDGET)
            now = drained = time.monotonic()
            ticked = now >= next_tick
            if ticked:
                behind = int((now - next_tick) / self._tick_s) + 1
                core.tick(min(behind, MAX_TICK_BACKLOG))  # after the drain: see tick()
                next_tick += behind * self._tick_s
                self._timers(now)
            readied = time.monotonic()
            self._handle_ready(hold_while_writing=not ticked)
            streamed = time.monotonic()
            if self.entries.has_due:
                self.entries.pump(streamed + ENTRIES_BUDGET, time.monotonic)
            self.stall.finish(drained, readied, streamed)
        self.stall.close()
        self.log.info("peer_stopping", **self.stall.summary(), **self.metrics.registry.totals())

    def _drain_router(self, until: float) -> None:
        """Handle queued ROUTER messages until the queue is empty or ``until`` passes, so a
        flood of client (or hostile) traffic cannot hold back ticks and heartbeats."""
        router, secure, deny = self.router, self.secure, self._replies.reply
        dispatch, receive = self.dispatcher.on_message, self.limits.receive
        for n in range(1, DRAIN_LIMIT + 1):
            try:
                frames = receive(router, secure, deny)  # bounded, and guarded when secure
            except zmq.Again:
                return
            if frames is None:
                continue
            dispatch(frames)
            if n % 64 == 0 and time.monotonic() >= until:
                return

    def _drain_peer(self, socket: zmq.Socket[bytes]) -> None:
        channel = self.channels.by_socket.get(socket)
        if channel is None:
            return
        for _ in range(DRAIN_LIMIT):
            try:
                frames = recv_frames(socket)
            except zmq.Again:
                return
            try:
                matched = channel.receive(frames)
            except OutOfRangeError as exc:  # a huge term/index (raftlog.bounds): never adopted
                count = self.metrics.messages_dropped.labels(reason=exc.drop_reason).inc()
                self.log.warning(
                    exc.drop_reason, peer=channel.peer.id, reason=str(exc), count=count
                )
                continue
            except Exception as exc:  # RemoteProtocolError and friends: never fatal
                self.metrics.bad_peer_responses.inc()
                self.log.warning("bad_peer_response", peer=channel.peer.id, reason=str(exc))
                continue
            if matched is not None:
                self.core.step_response(channel.peer.id, matched[0], matched[1])

    def _timers(self, now: float) -> None:
        if self._reload_requested:
            self._reload()
        self.machine.on_timer(now)
        self.topic_clock.on_timer()  # the leader's time checkpoints (issues #11, #24)
        self.observer.on_timer(now)
        self.clients.send_overdue_accepts(now)
        self.entries.sweep(now)
        self.info.sweep(now)
        if now >= self._next_housekeeping:
            self._next_housekeeping = now + HOUSEKEEPING_INTERVAL
            self.disk.check()
            self.compaction.housekeeping(self.topics.last_time)  # the log clock (#24)
            self.clock_watch.check(now)
            self.limits.memory.maybe_trim(now)

    # -- the Ready contract: carried out by ReadyExecutor ---------------------------------
    def _handle_ready(self, *, hold_while_writing: bool = False) -> None:
        """Carry out every pending Ready (``ReadyExecutor`` holds the order); while a write
        is in flight only on passes where the clock ticked (see ``ReadyExecutor.drain``)."""
        self.executor.drain(hold_while_writing=hold_while_writing)

    def _react(self, ready: Ready) -> None:
        soft = ready.soft_state
        if soft is not None:
            is_leader = soft.role is Role.LEADER
            self.observer.on_soft_state(soft, self._was_leader)
            if self._was_leader and not is_leader:
                self.clients.fail_all(soft.leader_id)
                self.entries.drop_all()
                self.channels.cancel_all()
            self.machine.set_leader(is_leader, soft.term)
            if is_leader and not self._was_leader:
                self.log.info("became_leader", term=soft.term, last_index=self.store.last_index)
            elif not is_leader:
                self.log.info(
                    "role_changed", role=soft.role.value, term=soft.term, leader=soft.leader_id
                )
            self._was_leader = is_leader
        for op in ready.snapshot_ops:
            if isinstance(op, SnapshotInstall):
                self.log.info("snapshot_installed", index=op.index, term=op.term)
        for event in ready.events:
            if isinstance(event, ConfigChangeCompleted):
                self.clients.on_config_completed(event.joint_index)
                self.log.info("config_change_completed", joint_index=event.joint_index)
            elif isinstance(event, ConfigChanged):
                self.log.info(
                    "config_changed",
                    index=event.index,
                    joint=event.config.is_joint,
                    peers=[p.id for p in event.config.all_peers()],
                )
            elif isinstance(event, SteppedDown):
                self.log.info("stepped_down", term=event.term, reason=event.reason)
                self.observer.on_stepped_down(event.term, event.reason)
            elif isinstance(event, TruncationRefused):
                self.metrics.truncations_refused.inc()
                self.log.error("truncation_refused", **_fields(event))
            elif isinstance(event, BadConfigEntry):
                self.log.error("bad_config_entry", index=event.index, reason=event.reason)
            elif not self.info.reads.on_event(event):  # ReadIndex answers (issue #29)
                react_to_guard_event(
                    event,
                    metrics=self.metrics,
                    log=self.log,
                    exit_when_removed=self.settings.options.exit_when_removed,
                    stop=self.stop,
                )

    def close(self) -> None:
        """Release sockets and stores (idempotent). Every resource is released even when one
        fails (a full disk fails the topic index's flush): the first error is raised after
        all of them were tried, so the caller can report it without masking anything."""
        errors: list[Exception] = []

        def attempt(release: Callable[[], object]) -> None:
            try:
                release()
            except Exception as exc:  # collected; the first one is raised at the end
                errors.append(exc)

        if self.storage is not None:  # the write in flight finishes; nothing waits for it
            attempt(self.storage.close)
        attempt(self.observer.close)  # its ROUTER monitor goes before the ROUTER
        if self._sockets_open:
            self._sockets_open = False
            if hasattr(self, "channels"):
                attempt(self.channels.close)
            if hasattr(self, "router"):
                attempt(lambda: self.router.close(linger=0))
            # the composite once built; before that (the topic index failed to open) the
            # broadcast machine alone holds a socket
            machine = getattr(self, "machine", None)
            attempt((machine if machine is not None else self.broadcast).close)
        if self.secure is not None:
            attempt(self.secure.close)
        attempt(lambda: self._context.destroy(linger=0))  # closes what a failure left open
        attempt(lambda: self._peer_context.destroy(linger=0))
        attempt(self.store.close)
        attempt(self.hard_state.close)
        attempt(self.snapshots.close)
        if errors:
            raise errors[0]


def _fields(event: Any) -> dict[str, Any]:
    return {name: getattr(event, name) for name in event.__slots__}
