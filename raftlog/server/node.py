"""``PeerNode``: the thin driver that runs one peer's loop over what ``build_peer`` wired.

The wiring (stores, sockets, machines, core, services, executor) is ``raftlog.server.wiring``;
each pass of the loop is ``raftlog.server.loop_step.loop_step`` -- the same function the
deterministic simulator and the catch-up run -- with this node as its inputs.

One thread, one ``zmq.Poller`` loop (measured: blocking pyzmq sockets driven by a poller
move ~4x the messages of ``zmq.asyncio`` on this class of machine, and the hot path --
ROUTER in, propose, append, replicate, reply -- is all socket work). Each pass of the loop
polls, then runs the step:

1. drains every readable socket (ROUTER: peers and clients; one DEALER per other peer, and
   its monitor, whose events open and close the link gate of ``PeerChannel``) and
   steps what arrived into the core -- so everything that queued up while the previous fsync
   ran is proposed together and written by the next single fsync (group commit);
2. ticks the core for the wall time that passed (``tick_ms`` per tick, after the drain);
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

import time
from typing import Any, Final

import zmq

from raftlog import speedups
from raftlog.config import PeerSettings
from raftlog.consensus import RaftCore
from raftlog.errors import ConfigError, StorageError
from raftlog.rpc.messages import TYPE_REQUEST_UPDATE
from raftlog.rpc.ranges import OutOfRangeError
from raftlog.security.peer import SecurePeer
from raftlog.server.loop_health import LoopStallMeter
from raftlog.server.loop_step import StepTimes, loop_step
from raftlog.server.ready_executor import ReadyExecutor
from raftlog.server.wiring import build_peer
from raftlog.transport import recv_frames

DRAIN_LIMIT: Final = 4096
"""Messages taken from one socket per pass, so one busy socket cannot starve the others."""
DRAIN_BUDGET: Final = 0.005
"""Seconds of ROUTER work per pass at least, before ticks and Readies get their turn."""
ENTRIES_BUDGET: Final = 0.005
"""Seconds of RequestEntries streaming per pass at most (one batch per due stream in turn)."""
HOUSEKEEPING_INTERVAL: Final = 1.0


class PeerNode:
    """A running peer. ``run()`` blocks until ``stop()`` (e.g. from a signal handler).

    The driver of ``loop_step`` over the parts ``build_peer`` wired: it is the step's inputs
    (``StepInputs``: sockets, the tick deadline, the timers, RequestEntries streaming)."""

    def __init__(self, settings: PeerSettings) -> None:
        self.settings = settings
        self._stopping = False
        self._reload_requested = False
        self._tick_s = settings.options.tick_ms / 1000.0
        self._next_tick = 0.0
        self._next_housekeeping = 0.0
        self._polled: list[tuple[Any, int]] = []
        """The sockets the last poll found readable (the pass's inputs)."""
        self.parts = build_peer(settings, stop=self.stop)
        parts = self.parts
        self.metrics, self.log, self.core = parts.metrics, parts.log, parts.core
        self._update_run = parts.services.clients.update_run(settings.ident.encode())
        """The RequestUpdates ``_drain_in_runs`` queues straight from the socket."""
        stall_ms = settings.options.election_timeout_min / 4
        self.stall = LoopStallMeter(stall_ms, self.metrics, self.log, time.monotonic)
        """``stall.max_ms``: the longest single pass of the loop so far (issue #12)."""
        store = parts.stores.log
        self.log.info(
            "peer_started", url=settings.url, bind=settings.bind_url, pub_url=settings.pub_url,
            data_dir=str(settings.data_dir), term=self.core.term, member=settings.is_member,
            first_index=store.first_index, last_index=store.last_index,
            last_applied=parts.machines.machine.last_applied, speedups=speedups.IMPLEMENTATION,
        )

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
        secure = self.parts.sockets.secure
        if secure is None:
            self.log.info("reload_done", security="off")
            return
        try:
            admitted = secure.reload()
        except ConfigError as exc:  # keep the policy in force: a typo must not lock all out
            self.log.error("reload_failed", error=str(exc), kept="previous allowlist")
            return
        self.log.info("reload_done", keys_admitted=admitted)

    def run(self) -> None:
        """The loop (see the module docstring) until ``stop()``; logs the metric totals when it
        ends. Each pass is one ``loop_step``, the very function the simulator runs."""
        parts = self.parts
        core, executor, poller = parts.core, parts.executor, parts.sockets.poller
        entries = parts.services.entries
        self._next_tick = time.monotonic() + self._tick_s
        self._step(core, executor)  # what the wiring left pending (no input, no time)
        while not self._stopping:
            timeout_ms = max(0, int((self._next_tick - time.monotonic()) * 1000.0) + 1)
            if entries.has_due:
                timeout_ms = 0  # RequestEntries batches are waiting for their slice
            self._polled = poller.poll(timeout_ms)
            self.stall.start()
            self.stall.finish(*self._step(core, executor))
        try:
            executor.flush_applied()
        except StorageError as exc:  # e.g. a full disk: the restart replays a few entries
            self.log.warning("applied_not_saved", reason=str(exc))
        self.stall.close()
        self.log.info("peer_stopping", **self.stall.summary(), **self.metrics.registry.totals())

    def _step(self, core: RaftCore, executor: ReadyExecutor) -> StepTimes:
        return loop_step(core, executor, self, time.monotonic, hold_while_writing=True)

    # -- StepInputs: what loop_step asks of the peer ---------------------------------------
    def drain_inputs(self) -> None:
        """Phase 1: peer traffic first (it keeps the cluster alive), then the ROUTER -- only
        when the poll found it readable (the poll is level-triggered: a ROUTER left with
        messages by the drain's budget is readable again at once). A pass woken by a
        follower's answer or a durable write alone does not end in an empty receive on it
        (issue #28)."""
        polled, self._polled = self._polled, []
        storage, io = self.parts.storage, self.parts.sockets
        router, channels = io.router, io.channels
        router_ready = False
        for socket, _ in polled:
            if isinstance(socket, int) and storage is not None:  # a write is durable
                storage.clear_wakeup()
            elif socket is router:
                router_ready = True
            elif not channels.read_link_events(socket):  # else a peer's link went up or down
                self._drain_peer(socket)
        if router_ready:
            self._drain_router(time.monotonic() + DRAIN_BUDGET)

    def ticks_due(self, now: float) -> int:
        """Phase 2: whole ticks since the tick deadline (``tick_ms`` each)."""
        if now < self._next_tick:
            return 0
        behind = int((now - self._next_tick) / self._tick_s) + 1
        self._next_tick += behind * self._tick_s
        return behind

    def after_readies(self, now: float) -> None:
        """Phase 5: RequestEntries streaming gets a slice of at most ``ENTRIES_BUDGET``."""
        entries = self.parts.services.entries
        if entries.has_due:
            entries.pump(now + ENTRIES_BUDGET, time.monotonic)

    def _drain_router(self, until: float) -> None:
        """Handle queued ROUTER messages until the queue is empty or ``until`` passes, so a
        flood of client (or hostile) traffic cannot hold back ticks and heartbeats."""
        parts = self.parts
        secure = parts.sockets.secure
        try:
            if secure is None and parts.limits.quotas is None:
                self._drain_in_runs(until)
            else:
                self._drain_checked(secure, until)
        finally:
            parts.services.dispatcher.flush()  # the drain's RequestUpdates, as one batch

    def _drain_in_runs(self, until: float) -> None:
        """Nothing to check per sender: RequestUpdates are queued in runs straight from the
        socket (``RouterLimits.take_run``, compiled when the transport twin is, issue #28);
        the message that ends a run goes through the dispatcher, after the run's flush was
        marked due, so the order of effects stays the arrival order."""
        parts = self.parts
        router, take_run = parts.sockets.router, parts.limits.take_run
        clients, dispatcher = parts.services.clients, parts.services.dispatcher
        shape = self._update_run
        taken = 0
        while taken < DRAIN_LIMIT:
            queue = clients.update_queue
            before = len(queue)
            count, frames = take_run(router, shape, queue)
            if count == 0:
                return
            taken += count
            if len(queue) > before:
                dispatcher.queued_run(TYPE_REQUEST_UPDATE)
            if frames is not None:
                dispatcher.on_message(frames)
            if time.monotonic() >= until:
                return

    def _drain_checked(self, secure: SecurePeer | None, until: float) -> None:
        """Every message through ``RouterLimits.receive`` (CURVE's request guard, quotas)."""
        parts = self.parts
        router, deny = parts.sockets.router, parts.services.replies.reply
        receive, dispatch = parts.limits.receive, parts.services.dispatcher.on_message
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
        channel = self.parts.sockets.channels.by_socket.get(socket)
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

    def on_ticked(self, now: float) -> None:
        """Phase 3: the timers, on a pass whose clock ticked."""
        if self._reload_requested:
            self._reload()
        parts, services = self.parts, self.parts.services
        parts.machines.machine.on_timer(now)
        parts.executor.flush_applied()  # what no write carried since the last tick
        services.topic_clock.on_timer()  # the leader's time checkpoints (issues #11, #24)
        parts.observer.on_timer(now)
        services.clients.send_overdue_accepts(now)
        services.entries.sweep(now)
        services.info.sweep(now)
        services.compaction.step()  # a snapshot under way: one step a pass
        if now >= self._next_housekeeping:
            self._next_housekeeping = now + HOUSEKEEPING_INTERVAL
            parts.disk.check()
            services.compaction.housekeeping(parts.machines.topics.last_time)  # log clock #24
            services.clock_watch.check(now)
            parts.limits.memory.maybe_trim(now)

    def close(self) -> None:
        """Release sockets and stores (idempotent), newest first (``Releases``): every
        resource is released even when one fails, and the first error is raised after all
        of them were tried, so the caller can report it without masking anything."""
        self.parts.releases.close()
