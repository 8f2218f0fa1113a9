"""``DurableWrites``: the seam between the Ready executor and the disk.

Why a seam: the peer writes a Ready's hard state and entries on a storage thread
(``raftlog.server.storage_thread``) so that its loop keeps receiving, replicating and batching
while the fsync runs; the catch-up writes inline; the simulator (``tests/sim``) completes
writes after random delays and loses them in crashes. The executor
(``raftlog.server.ready_executor``) is the same code over all three, so the simulator checks
the ordering the peer runs.

The contract every implementation keeps:

* ``submit(hard_state, append)`` queues one Ready's writes and returns its *ticket*
  (1, 2, 3, ...). Nothing is durable on return (inline implementations may make it so).
* Tickets become durable **in order** and each one atomically: once ticket ``t`` is durable,
  every write submitted before it is too (one WAL, one writer). ``durable()`` is the highest
  durable ticket; calling it also lets an implementation take its next step (start the next
  write, run the bookkeeping of a finished one) -- it never blocks.
* ``wait()`` blocks until every submitted ticket is durable (a barrier: snapshot installs and
  direct writes such as compaction go through the stores themselves and must not overtake,
  or be overtaken by, a write in flight).
* ``record_applied(index)`` remembers the state machine's progress without a sync of its own;
  it rides on the next write (staged into that write's hard state, so it costs no write of
  its own), and ``flush_applied()`` -- which the driver calls on its timer and when it stops
  -- writes what no write carried yet (``HardStateStore.save_applied``, unsynced). Why not a
  write per apply: at one update in flight that was a second RocksDB write per update on
  every peer (issue #28). Why the lag is safe: losing the record only makes a restarted
  peer re-apply the committed entries after the one it carries, which the state machines
  already had to tolerate: the record was unsynced before too, so a crash could lose it the
  same way (the topic index keeps its own position and skips a replay).
"""

from __future__ import annotations

from typing import Protocol

from raftlog.consensus import LogAppend
from raftlog.storage.base import HardState, HardStateStore, ReadyStore


def carrying_applied(state: HardState | None, saved: HardState, applied: int) -> HardState | None:
    """The hard state a write stages so that it carries ``applied``: the write's own
    ``state``, or the ``saved`` one when the write has none and ``applied`` is further than
    what was saved; None when the write needs no hard state at all."""
    if state is None:
        if applied <= saved.last_applied:
            return None
        state = saved
    return state.with_applied(applied)


class DurableWrites(Protocol):
    """Where the executor's writes go (see the module docstring for the contract)."""

    @property
    def submitted(self) -> int:
        """The ticket of the last write submitted (0 before the first)."""
        ...

    def submit(self, hard_state: HardState | None, append: LogAppend | None) -> int:
        """Queue one Ready's writes; returns its ticket."""
        ...

    def durable(self) -> int:
        """The highest ticket that is durable now (never blocks)."""
        ...

    def wait(self) -> None:
        """Block until every submitted ticket is durable."""
        ...

    def record_applied(self, index: int) -> None:
        """The state machine reached ``index`` (carried by the next write, unsynced)."""
        ...

    def flush_applied(self) -> None:
        """Write the applied index now if no write carried it yet (never blocks on a sync)."""
        ...


class SynchronousWrites:
    """``DurableWrites`` that writes inline: each ticket is durable when ``submit`` returns.

    For drivers with nothing to overlap (the catch-up of a non-member peer, unit tests) and
    the reference for what the threaded implementation must be equivalent to."""

    def __init__(self, ready_store: ReadyStore, hard_state: HardStateStore) -> None:
        self._ready_store = ready_store
        self._hard_state = hard_state
        self._ticket = 0
        self._applied = 0

    @property
    def submitted(self) -> int:
        """The last ticket handed out (all of them are durable)."""
        return self._ticket

    def submit(self, hard_state: HardState | None, append: LogAppend | None) -> int:
        """One synced write (``ReadyStore.persist``), done on return; it carries the applied
        index recorded since the last write."""
        if hard_state is not None or append is not None:
            hard_state = carrying_applied(hard_state, self._hard_state.load(), self._applied)
            self._ready_store.persist(
                hard_state,
                append.first_index if append is not None else 0,
                append.entries if append is not None else None,
            )
        self._ticket += 1
        return self._ticket

    def durable(self) -> int:
        """Every ticket: each was written before ``submit`` returned."""
        return self._ticket

    def wait(self) -> None:
        """Nothing is ever in flight."""

    def record_applied(self, index: int) -> None:
        """Remembered for the next write (``submit``) or ``flush_applied``."""
        self._applied = max(self._applied, index)

    def flush_applied(self) -> None:
        """Unsynced; ``save_applied`` writes only when no write carried the index yet."""
        self._hard_state.save_applied(self._applied)


def merge_appends(earlier: LogAppend | None, later: LogAppend) -> LogAppend:
    """One ``LogAppend`` with the effect of ``earlier`` then ``later`` (group commit: the
    storage thread writes every Ready queued during an fsync as one batch).

    ``later`` truncates from its ``first_index``: what ``earlier`` wrote from there on is
    replaced; a ``later`` that starts at or before ``earlier`` replaces all of it."""
    if earlier is None:
        return later
    keep = later.first_index - earlier.first_index
    if keep <= 0:
        return later
    if keep > len(earlier.entries):
        raise ValueError(
            f"append at {later.first_index} leaves a gap after "
            f"{earlier.first_index + len(earlier.entries) - 1}"
        )
    return LogAppend(earlier.first_index, earlier.entries[:keep] + later.entries)


def _conforms(writes: SynchronousWrites) -> DurableWrites:
    """mypy proves the inline implementation satisfies the Protocol."""
    return writes
