"""The one place where a Ready is carried out, in the only safe order.

Used by the peer (``PeerNode``), the catch-up of a non-member peer (``CatchUp``) and the
deterministic simulator (``tests/sim/cluster.py``), so the 300 simulated seeds check the very
code the peers run. The order (``raftlog.consensus.ready`` has the contract):

0. connect peers named by a ``ConfigChanged`` event, then send ``messages_now`` (the leader's
   AppendEntries may leave before its own copy is durable);
1-3. persist: the hard state and the entries in **one synced batch** (``ReadyStore.persist``);
   when the Ready also carries snapshot operations, the hard state is written first on its
   own, then the snapshot operations, then the entries -- a Ready of that kind is rare and
   the hard state must not trail a snapshot that a crash could leave installed;
4. send ``messages_after_persist`` (votes, replies: they promise 1-3 are durable);
5. apply ``committed`` and report progress (``applied``);
6. let the driver react to ``soft_state`` and ``events``;
7. ``core.advance(ready)``.

``crash_point(name)`` is the simulator's seam: it may end the process's life between two
steps (``before_persist``, ``before_restore``, ``after_persist``); production passes none.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Protocol

from raftlog.consensus import (
    ConfigChanged,
    Ready,
    SendReply,
    SendRequest,
    SnapshotChunkWrite,
    SnapshotInstall,
)
from raftlog.rpc.messages import Peer, PeerRequest, PeerResponse
from raftlog.storage.base import HardStateStore, LogStore, ReadyStore, SnapshotStore


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

    def advance(self, ready: Ready) -> None:
        """``ready`` is carried out."""
        ...

    def connect_to(self) -> tuple[Peer, ...]:
        """The peers to stay connected to (the configuration plus departing peers)."""
        ...


CrashPoint = Callable[[str], bool]
"""``crash_point(name)``: True when the (simulated) process died there; the Ready stops."""


def _never(_where: str) -> bool:
    return False


class ReadyExecutor:
    """Carries out Readies against injected stores, state machine and outbox."""

    def __init__(
        self,
        *,
        log: LogStore,
        hard_state: HardStateStore,
        snapshots: SnapshotStore,
        ready_store: ReadyStore,
        machine: AppliedMachine,
        outbox: Outbox,
        on_applied: Callable[[int], None] | None = None,
        react: Callable[[Ready], None] | None = None,
        crash_point: CrashPoint = _never,
    ) -> None:
        self._log = log
        self._hard_state = hard_state
        self._snapshots = snapshots
        self._ready_store = ready_store
        self._machine = machine
        self._outbox = outbox
        self._on_applied = on_applied
        self._react = react
        self._crash_point = crash_point
        self.core: ReadyCore | None = None
        """The core whose Readies ``drain`` carries out (None: Readies come from elsewhere,
        e.g. a catch-up replaying what the leader already committed)."""

    # -- the whole Ready -------------------------------------------------------------------
    def drain(self) -> None:
        """Carry out every pending Ready of ``core``."""
        core = self.core
        while core is not None and core.has_ready() and self.execute(core.ready()):
            core = self.core

    def execute(self, ready: Ready) -> bool:
        """Steps 0-7; False when a crash point ended the process's life on the way."""
        return self.begin(ready) and self.finish(ready)

    def begin(self, ready: Ready) -> bool:
        """Step 0: connect, send what may leave at once. False: crashed before persisting."""
        for event in ready.events:  # connect new peers before messages go to them
            if isinstance(event, ConfigChanged):
                # the configuration's peers plus any this leader still tells of their removal
                self._outbox.connect(
                    event.config.all_peers() if self.core is None else self.core.connect_to()
                )
        self._send(ready.messages_now)
        return not self._crash_point("before_persist")

    def finish(self, ready: Ready) -> bool:
        """Steps 1-7 (the simulator may call this some ticks after ``begin``: a slow disk)."""
        if not self._persist(ready) or self._crash_point("after_persist"):
            return False
        self._send(ready.messages_after_persist)
        committed = ready.committed
        if committed is not None:
            raw = [entry.to_bytes() for entry in committed.entries]
            core = self.core
            term = core.term if core is not None else committed.entries[-1].term
            self._machine.apply(committed.first_index, raw, term)
            self._applied(self._machine.last_applied)
        if self._react is not None:
            self._react(ready)
        if self.core is not None:
            self.core.advance(ready)
        return True

    # -- the steps -------------------------------------------------------------------------
    def _send(self, messages: tuple[SendRequest | SendReply, ...]) -> None:
        outbox = self._outbox
        for out in messages:
            if isinstance(out, SendRequest):
                outbox.send_request(out.to, out.message)
            else:
                outbox.send_reply(out.token, out.message)

    def _persist(self, ready: Ready) -> bool:
        hard_state = ready.hard_state
        if hard_state is not None:
            applied = max(hard_state.last_applied, self._machine.last_applied)
            hard_state = replace(hard_state, last_applied=applied)
        append = ready.append
        if ready.snapshot_ops:
            if hard_state is not None:
                self._ready_store.persist(hard_state, 0, None)
                hard_state = None
            for op in ready.snapshot_ops:
                if isinstance(op, SnapshotChunkWrite):
                    self._snapshots.begin(op.index, op.term, op.total_size)
                    self._snapshots.write_chunk(op.offset, op.data)
                elif not self._install(op):
                    return False
        if hard_state is not None or append is not None:
            self._ready_store.persist(
                hard_state,
                append.first_index if append is not None else 0,
                append.entries if append is not None else None,
            )
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
        prefix, remember it (unsynced: the next synced write carries it; losing it only
        replays entries) and let the driver answer whoever waited for it."""
        if self.core is not None:
            self.core.applied(index)
        self._log.set_commit_floor(index)
        self._hard_state.save_applied(index)
        if self._on_applied is not None:
            self._on_applied(index)
