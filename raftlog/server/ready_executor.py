"""The one place where a Ready is carried out, in the only safe order.

Used by the peer (``PeerNode``), the catch-up of a non-member peer (``CatchUp``) and the
deterministic simulator (``tests/sim/cluster.py``), so the simulated seeds check the very
code the peers run. The writes go through a ``DurableWrites`` seam
(``raftlog.server.durable_writes``): the peer's storage thread, inline writes for the
catch-up, delayed and crashable writes in the simulator. A Ready is *dispatched* at once and
*completed* when its writes are durable, so the loop takes the next Ready while an fsync runs.

Dispatch (``execute``), in order:

0. connect peers named by a ``ConfigChanged`` event, then send ``messages_now`` (the leader's
   AppendEntries may leave before its own copy is durable);
1-3. submit the hard state and the append as one write (``DurableWrites.submit``). A Ready
   with snapshot operations first waits for every write in flight, then is written inline:
   the hard state on its own, the snapshot operations, then the entries (rare; the hard
   state must not trail a snapshot that a crash could leave installed);
5. tell ``on_committed`` (the leader answers plain updates), apply ``committed`` and
   report progress (``applied``): the core hands out only entries
   that are durable here already, so this need not wait for the Ready's own write. Where it
   goes (issue #16: what waits for what on the path of an update): a Ready without
   ``messages_after_persist`` (a leader's) applies *before* 1-3, so the answers to clients
   leave before that fsync; a Ready with them (a follower's) applies after 7a and after
   its completion below, so its answer to the leader leaves first when the write is inline;
   committed entries the Ready itself writes (a catch-up's) are applied after 1-3;
6. let the driver react to ``soft_state`` and ``events`` (after 5);
7a. ``core.dispatched(ready)``: the core may hand out the next Ready.

Completion (``collect``, on every pass; at once for inline writes), oldest Ready first, once
every write submitted up to and including its own is durable:

4. send ``messages_after_persist`` (votes, replies: they promise 1-3 are durable). A Ready
   without writes but with such messages waits too: a reply to a heartbeat promises the
   entries of the write in flight before it;
7b. ``core.persisted(ready)``: the entries are stable; a leader counts its own copy now.

``crash_point(name)`` is the simulator's seam: it may end the process's life between two
steps (``while_writing`` as a drain starts, ``before_persist``, ``before_restore``,
``after_persist``); production passes none.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Sequence
from typing import Protocol

from raftlog.consensus import (
    ConfigChanged,
    Ready,
    SendReply,
    SendRequest,
    SnapshotChunkWrite,
    SnapshotInstall,
)
from raftlog.entry import entries_bytes
from raftlog.rpc.messages import Peer, PeerRequest, PeerResponse
from raftlog.server.durable_writes import DurableWrites, SynchronousWrites
from raftlog.storage.base import HardState, HardStateStore, LogStore, ReadyStore, SnapshotStore


class AppliedMachine(Protocol):
    """What the executor needs from the state machine: apply, restore, progress."""

    @property
    def last_applied(self) -> int:
        """Index of the last entry applied (0 when none)."""
        ...

    def apply(self, first_index: int, entries: Sequence[bytes], term: int) -> None:
        """Apply serialized committed entries from ``first_index`` on."""
        ...

    def restore(self, index: int, term: int, data: bytes) -> None:
        """Replace the state with the installed snapshot covering up to ``index``."""
        ...


class Outbox(Protocol):
    """Where the core's messages go: the peer's sockets or the simulated network."""

    def connect(self, peers: Sequence[Peer]) -> None:
        """The configuration changed: reach exactly these peers from now on."""
        ...

    def send_request(self, to: str, message: PeerRequest) -> None:
        """A new peer request (``SendRequest``)."""
        ...

    def send_reply(self, token: object, message: PeerResponse) -> None:
        """The answer to the inbound peer request ``token`` came with (``SendReply``)."""
        ...


class ReadyCore(Protocol):
    """The core's side of the contract (``RaftCore`` satisfies it)."""

    @property
    def term(self) -> int:
        """The current term (the state machine broadcasts it with applied entries)."""
        ...

    def has_ready(self) -> bool:
        """Whether ``ready()`` has work."""
        ...

    def ready(self) -> Ready:
        """The next batch of work."""
        ...

    def applied(self, index: int) -> None:
        """The state machine reached ``index``."""
        ...

    def dispatched(self, ready: Ready) -> None:
        """``ready`` is taken: sent, its writes queued, its committed entries applied."""
        ...

    def persisted(self, ready: Ready) -> None:
        """The writes of ``ready`` are durable."""
        ...

    def connect_to(self) -> tuple[Peer, ...]:
        """The peers to stay connected to (the configuration plus departing peers)."""
        ...


CrashPoint = Callable[[str], bool]
"""``crash_point(name)``: True when the (simulated) process died there; the Ready stops."""


def _never(_where: str) -> bool:
    return False


def _applies_before(ready: Ready) -> bool:
    """Whether every committed entry of ``ready`` lies below the entries it appends."""
    committed, append = ready.committed, ready.append
    if committed is None:
        return False
    return append is None or committed.first_index + len(committed.entries) <= append.first_index


class ReadyExecutor:
    """Carries out Readies against injected stores, writes, state machine and outbox."""

    def __init__(
        self,
        *,
        log: LogStore,
        hard_state: HardStateStore,
        snapshots: SnapshotStore,
        ready_store: ReadyStore,
        machine: AppliedMachine,
        outbox: Outbox,
        writes: DurableWrites | None = None,
        on_applied: Callable[[int], None] | None = None,
        on_committed: Callable[[int], None] | None = None,
        react: Callable[[Ready], None] | None = None,
        crash_point: CrashPoint = _never,
        inspect: Callable[[Ready], None] | None = None,
    ) -> None:
        self._log = log
        self._hard_state = hard_state
        self._snapshots = snapshots
        self._ready_store = ready_store
        self._writes: DurableWrites = (
            writes if writes is not None else SynchronousWrites(ready_store, hard_state)
        )
        self._machine = machine
        self._outbox = outbox
        self._on_applied = on_applied
        self._on_committed = on_committed
        """Told the last index of each committed batch *before* the machine applies it:
        the leader answers plain updates there (``raftlog.server.update_waiters``)."""
        self._react = react
        self._crash_point = crash_point
        self._inspect = inspect
        """Sees each Ready ``drain`` takes before it is carried out (the simulator's
        invariant checker and trace); production passes none."""
        self._waiting: deque[tuple[int, Ready]] = deque()
        """Dispatched Readies waiting for their writes (ticket, Ready), oldest first."""
        self.core: ReadyCore | None = None
        """The core whose Readies ``drain`` carries out (None: Readies come from elsewhere,
        e.g. a catch-up replaying what the leader already committed)."""

    @property
    def waiting(self) -> int:
        """Readies dispatched whose writes are not durable yet."""
        return len(self._waiting)

    # -- the whole Ready -------------------------------------------------------------------
    def drain(self, *, hold_while_writing: bool = False) -> None:
        """Complete the Readies whose writes are durable, then dispatch every pending one.

        ``hold_while_writing``: take no new Ready while a write is still in flight; the
        inputs stepped meanwhile go into one Ready taken when it is durable. Why: on a busy
        peer every Ready costs messages (an AppendEntries per follower, a reply per
        AppendEntries) and a merged write; one Ready per fsync keeps the batches as large as
        when the loop itself waited for the disk, while the loop keeps receiving and
        stepping during the fsync instead of blocking. The peer holds except on passes
        where the clock ticked (heartbeats, votes, retransmissions must not wait for a slow
        disk); the simulator takes every Ready at once, the most general schedule."""
        if self._crash_point("while_writing"):  # the simulator's: a write may be in flight
            return
        writes, inspect = self._writes, self._inspect
        while self.collect():
            core = self.core
            if core is None or not core.has_ready():
                return
            if hold_while_writing and writes.durable() < writes.submitted:
                return
            ready = core.ready()
            if inspect is not None:
                inspect(ready)
            if not self.execute(ready):
                return

    def execute(self, ready: Ready) -> bool:
        """Dispatch ``ready`` (steps 0-3, 5-7a), then complete what is durable; False when a
        crash point ended the process's life on the way."""
        for event in ready.events:  # connect new peers before messages go to them
            if isinstance(event, ConfigChanged):
                # the configuration's peers plus any this leader still tells of their removal
                self._outbox.connect(
                    event.config.all_peers() if self.core is None else self.core.connect_to()
                )
        self._send(ready.messages_now)
        if self._crash_point("before_persist"):
            return False
        if ready.snapshot_ops:
            if not self.settle() or not self._persist_inline(ready):
                return False
            self._apply(ready)
            return self._dispatched(ready, self._writes.submitted)
        if not ready.messages_after_persist and _applies_before(ready):
            # Committed entries that this Ready does not write are durable here already (the
            # core hands out no others): a leader applies them -- answers its clients --
            # before its write, so the answers do not wait for the fsync.
            self._apply(ready)
            return self._dispatched(ready, self._submit(ready))
        ticket = self._submit(ready)
        if ready.messages_after_persist:
            # A follower's answer to the leader (or a vote) leaves as soon as the write is
            # durable -- at once when it is written inline -- and the apply comes after it.
            if self.core is not None:
                self.core.dispatched(ready)
            self._waiting.append((ticket, ready))
            if not self.collect():
                return False
            self._apply(ready)
            if self._react is not None:
                self._react(ready)
            return True
        self._apply(ready)  # a catch-up's Ready commits the very entries it writes: after it
        return self._dispatched(ready, ticket)

    def _submit(self, ready: Ready) -> int:
        """Steps 1-3 (no snapshot operations): the write's ticket; a Ready without writes
        gets the last one (its replies promise the writes before it)."""
        if ready.hard_state is not None or ready.append is not None:
            return self._writes.submit(self._with_applied(ready.hard_state), ready.append)
        return self._writes.submitted

    def _dispatched(self, ready: Ready, ticket: int) -> bool:
        """Steps 6-7a, then complete what is durable."""
        if self._react is not None:
            self._react(ready)
        if self.core is not None:
            self.core.dispatched(ready)
        if ready.needs_persist or ready.messages_after_persist:
            self._waiting.append((ticket, ready))
        return self.collect()

    def collect(self) -> bool:
        """Steps 4 and 7b for every Ready whose writes are durable, oldest first; False when
        a crash point ended the process's life on the way."""
        waiting = self._waiting
        if not waiting:
            return True
        durable = self._writes.durable()
        while waiting and waiting[0][0] <= durable:
            _, ready = waiting.popleft()
            if self._crash_point("after_persist"):
                return False
            self._send(ready.messages_after_persist)
            if ready.needs_persist and self.core is not None:
                self.core.persisted(ready)
        return True

    def settle(self) -> bool:
        """Wait for every write in flight and complete its Readies (a barrier)."""
        self._writes.wait()
        return self.collect()

    def flush_applied(self) -> None:
        """Write the applied index no write carried yet (``DurableWrites.flush_applied``):
        the driver's timer and its stop call this, so an idle peer's record trails by at most
        a tick."""
        self._writes.flush_applied()

    def forget(self) -> None:
        """The process died: what waited for its writes never completes (simulator)."""
        self._waiting.clear()

    # -- the steps -------------------------------------------------------------------------
    def _apply(self, ready: Ready) -> None:
        """Step 5: apply the committed entries (the core hands out only entries durable
        here, so this never waits for the Ready's own write)."""
        committed = ready.committed
        if committed is not None:
            if self._on_committed is not None:
                self._on_committed(committed.first_index + len(committed.entries) - 1)
            raw = entries_bytes(committed.entries)
            core = self.core
            term = core.term if core is not None else committed.entries[-1].term
            self._machine.apply(committed.first_index, raw, term)
            self._applied(self._machine.last_applied)

    def _send(self, messages: tuple[SendRequest | SendReply, ...]) -> None:
        outbox = self._outbox
        for out in messages:
            if isinstance(out, SendRequest):
                outbox.send_request(out.to, out.message)
            else:
                outbox.send_reply(out.token, out.message)

    def _with_applied(self, hard_state: HardState | None) -> HardState | None:
        """Never write a ``last_applied`` below what the state machine has reached."""
        if hard_state is None:
            return None
        return hard_state.with_applied(self._machine.last_applied)

    def _persist_inline(self, ready: Ready) -> bool:
        """Steps 1-3 of a Ready with snapshot operations, written here (nothing in flight)."""
        hard_state = self._with_applied(ready.hard_state)
        if hard_state is not None:
            self._ready_store.persist(hard_state, 0, None)
        for op in ready.snapshot_ops:
            if isinstance(op, SnapshotChunkWrite):
                self._snapshots.begin(op.index, op.term, op.total_size)
                self._snapshots.write_chunk(op.offset, op.data)
            elif not self._install(op):
                return False
        append = ready.append
        if append is not None:
            self._ready_store.persist(None, append.first_index, append.entries)
        return True

    def _install(self, op: SnapshotInstall) -> bool:
        """Make the snapshot current and restore the state machine from it."""
        if op.finish_receive:
            self._snapshots.finish()
        self._log.compact(op.index, op.term)
        if self._crash_point("before_restore"):
            return False
        meta = self._snapshots.meta()
        if meta is None or meta.index != op.index:
            raise RuntimeError(f"snapshot {op.index} is not the installed one ({meta})")
        self._machine.restore(op.index, op.term, self._snapshots.read(0, meta.size))
        self._applied(op.index)
        return True

    def _applied(self, index: int) -> None:
        """The state machine reached ``index``: tell the core, guard the log's committed
        prefix, remember it (unsynced: the next synced write carries it, or
        ``flush_applied``; losing it only replays entries) and let the driver answer
        whoever waited for it."""
        if self.core is not None:
            self.core.applied(index)
        self._log.set_commit_floor(index)
        self._writes.record_applied(index)
        if self._on_applied is not None:
            self._on_applied(index)
