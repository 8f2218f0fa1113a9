"""``StorageThread``: a peer's Ready writes, fsynced on a thread of their own.

Why: a synced RocksDB write costs one fdatasync (milliseconds, far more under a loaded
disk). Done on the consensus loop, as before, it blocked receiving, replicating and replying
for that long -- a third of a busy leader's loop time and half a follower's (profiles in
docs/performance.md), and loop stalls of hundreds of milliseconds when the machine was
starved (issue #12). The fdatasync runs with the GIL released (``RocksDatabase.write`` syncs
through ``flush_wal``: rocksdict's ``write`` itself keeps the GIL, which is why this thread
measured slower than inline writes until issue #28 found it), so on this thread the fsync
overlaps the loop's work. Small batches with nothing in flight are still written inline
(``INLINE_ENTRIES``): at light load the hand-over would only add two wake-ups.

How (``DurableWrites`` contract in ``raftlog.server.durable_writes``):

* **One write in flight, group commit.** ``submit`` queues a Ready's hard state and append.
  When no write is in flight, everything queued is merged (latest hard state,
  ``merge_appends``) and staged into one ``WriteBatch`` **on the loop thread** -- staging
  reads the store's cached bounds and request-id index, which only the loop thread touches --
  and handed to the thread, which does only the synced write (``write_synced``). Readies queued
  during that fsync go together into the next one.
* **Bookkeeping on the loop thread.** When the write returns, the thread queues the outcome
  and writes a byte to a pipe whose read end (``fd``) the peer's poller watches; ``durable()``
  (called by the executor on every pass) then updates the stores' cached bounds, advances the
  durable ticket and starts the next write. So the stores' caches never claim what is not on
  disk, and nothing but RocksDB itself is shared between the threads.
* **Barrier.** ``wait()`` blocks until everything submitted is durable; the stores' own
  writes (compaction, request-id pruning) call it first (``RocksLogStore.before_write``) so
  they never interleave with a batch staged from older bounds.
* **Applied progress** (``record_applied``) is folded into the next batch's hard state, or
  written unsynced at once when nothing is queued or in flight.
* **Failure.** An exception from the write (full disk, I/O error) is re-raised on the loop
  thread by ``durable``/``wait``: the peer stops (exit code 3), as it did when the write ran
  on the loop -- nothing queued after it was acknowledged.

Where it syncs: ``_write`` (on the thread, or inline) -> ``RocksLogStore.write_synced`` (one batch
per write).
"""

from __future__ import annotations

import contextlib
import os
import queue
import threading
import time
from collections.abc import Callable
from typing import Final

from rocksdict import WriteBatch

from raftlog.consensus import LogAppend
from raftlog.errors import StorageError
from raftlog.metrics import PeerMetrics
from raftlog.server.durable_writes import DurableWrites, carrying_applied, merge_appends
from raftlog.storage.base import HardState
from raftlog.storage.hard_state import RocksHardStateStore
from raftlog.storage.rocks import RocksLogStore

_STOP: Final = None


def start_storage_thread(
    log: RocksLogStore, hard_state: RocksHardStateStore, metrics: PeerMetrics
) -> StorageThread:
    """The peer's storage thread, with the store's direct writes behind its barrier.

    Python's GIL switch interval is left at its 5 ms default on purpose: a shorter one
    (0.5 ms was tried, so that completions need not wait for a busy loop) made CPython force
    the GIL from the loop to this thread far more often, and each forced hand-over leaves the
    loop waiting until this thread is scheduled -- on a starved CPU that meant loop passes of
    seconds and three times the elections (docs/performance.md, section 6)."""
    thread = StorageThread(log, hard_state, metrics)
    log.before_write = thread.wait  # compaction and pruning never interleave with a batch
    return thread


class _Written:
    """What the thread hands back for one batch: how long it took, or why it failed."""

    __slots__ = ("error", "seconds")

    def __init__(self, seconds: float, error: BaseException | None) -> None:
        self.seconds = seconds
        self.error = error


INLINE_ENTRIES: Final = 1
"""A batch of at most this many entries, with no write in flight, is written on the loop
thread itself. Why: handing a write to the thread and back costs two wake-ups (the queue, the
pipe) on the critical path of every update when the load is light -- at one update in
flight it is all the loop would do meanwhile anyway (issue #28: p50 1.76 ms inline against
2.40 ms handed over, a loaded machine) -- while a larger batch means updates are queuing,
and then the loop gains by receiving and proposing during the fsync."""


class StorageThread:
    """``DurableWrites`` over a peer's RocksDB log and hard-state stores (one database)."""

    def __init__(
        self,
        log: RocksLogStore,
        hard_state: RocksHardStateStore,
        metrics: PeerMetrics | None = None,
        inline_entries: int = INLINE_ENTRIES,
    ) -> None:
        self._inline_entries = inline_entries
        self._log = log
        self._hard_state = hard_state
        metrics = metrics if metrics is not None else PeerMetrics()
        self._seconds = metrics.fsync_seconds.labels()
        self._batch_entries = metrics.fsync_batch_entries.labels()
        self._appended = metrics.entries_appended.labels()
        self._queued: list[tuple[int, HardState | None, LogAppend | None]] = []
        self._in_flight: tuple[int, list[Callable[[], None]], int] | None = None
        """(last ticket in the batch, store bookkeeping to run once written, entries)."""
        self._applied = 0
        self._submitted = 0
        self._durable = 0
        self._failed: BaseException | None = None
        self._jobs: queue.SimpleQueue[WriteBatch | None] = queue.SimpleQueue()
        self._results: queue.SimpleQueue[_Written] = queue.SimpleQueue()
        self._wake_read, self._wake_write = os.pipe()
        os.set_blocking(self._wake_read, False)
        self._thread = threading.Thread(target=self._run, name="raftlog-storage", daemon=True)
        self._thread.start()

    @property
    def fd(self) -> int:
        """Readable when a write finished: register it in the loop's poller."""
        return self._wake_read

    @property
    def submitted(self) -> int:
        """The ticket of the last write submitted."""
        return self._submitted

    @property
    def busy(self) -> bool:
        """A write is in flight or queued."""
        return self._in_flight is not None or bool(self._queued)

    # -- the loop thread's side --------------------------------------------------------------
    def submit(self, hard_state: HardState | None, append: LogAppend | None) -> int:
        """Queue one Ready's writes; they start at once when no write is in flight."""
        self._check()
        self._submitted += 1
        self._queued.append((self._submitted, hard_state, append))
        if self._in_flight is None:
            self._start()
        return self._submitted

    def durable(self) -> int:
        """Collect a finished write (bookkeeping, next write) without blocking."""
        self._check()
        if self._in_flight is not None:
            try:
                written = self._results.get_nowait()
            except queue.Empty:
                return self._durable
            self._written(written)
        return self._durable

    def clear_wakeup(self) -> None:
        """The poller saw ``fd`` readable: consume the wake-up (one read, whatever number of
        writes it stands for; ``durable`` collects them)."""
        with contextlib.suppress(BlockingIOError):
            os.read(self._wake_read, 4096)

    def wait(self) -> None:
        """Block until every submitted write is durable (returns at once once closed)."""
        if self._wake_read < 0:
            return
        self._check()
        while self._in_flight is not None:
            self._written(self._results.get())

    def record_applied(self, index: int) -> None:
        """Remember the applied index; unsynced now if idle, else in the next batch."""
        self._applied = max(self._applied, index)
        self.flush_applied()

    def flush_applied(self) -> None:
        """Unsynced now when idle (``save_applied`` writes only an index it has not saved);
        while a write is in flight or queued, the next batch carries it."""
        if not self.busy:
            self._hard_state.save_applied(self._applied)

    def close(self) -> None:
        """Finish the write in flight (its outcome is dropped: nobody waits any more), stop
        the thread, close the pipe. Idempotent; ``submit`` refuses afterwards."""
        self._in_flight = None
        self._queued.clear()
        self._failed = self._failed or StorageError("the storage thread is stopped")
        if self._thread.is_alive():
            self._jobs.put(_STOP)
            self._thread.join()
        for fd in (self._wake_read, self._wake_write):
            with contextlib.suppress(OSError):
                os.close(fd)
        self._wake_read = self._wake_write = -1

    # -- internals ---------------------------------------------------------------------------
    def _check(self) -> None:
        if self._failed is not None:
            raise self._failed

    def _start(self) -> None:
        """Merge what is queued into one batch, staged here, written by the thread."""
        queued, self._queued = self._queued, []
        hard_state: HardState | None = None
        append: LogAppend | None = None
        for _, state, write in queued:
            if state is not None:
                hard_state = state
            if write is not None:
                append = merge_appends(append, write)
        hard_state = carrying_applied(hard_state, self._hard_state.load(), self._applied)
        batch = WriteBatch(raw_mode=True)
        done: list[Callable[[], None]] = []
        if append is not None:
            done.append(self._log.stage_append(batch, append.first_index, append.entries))
        if hard_state is not None:
            done.append(self._hard_state.stage(batch, hard_state))
        entries = len(append.entries) if append else 0
        self._in_flight = (queued[-1][0], done, entries)
        if entries <= self._inline_entries:
            self._written(_write(self._log, batch))  # on the loop thread: raises if it failed
            return
        self._jobs.put(batch)

    def _written(self, written: _Written) -> None:
        """A batch is on disk (or failed): bookkeeping, then the next batch."""
        in_flight, self._in_flight = self._in_flight, None
        if written.error is not None:
            self._failed = written.error
            raise written.error
        assert in_flight is not None
        ticket, done, entries = in_flight
        for step in done:
            step()
        self._durable = ticket
        self._seconds.observe(written.seconds)
        if entries:
            self._batch_entries.observe(entries)
            self._appended.inc(entries)
        if self._queued:
            self._start()
        else:
            self.flush_applied()

    # -- the storage thread ------------------------------------------------------------------
    def _run(self) -> None:
        log = self._log
        while True:
            batch = self._jobs.get()
            if batch is None:
                return
            self._results.put(_write(log, batch))  # a failure goes to the loop thread
            try:
                os.write(self._wake_write, b"w")
            except OSError:  # closed while stopping: nobody listens any more
                return


def _write(log: RocksLogStore, batch: WriteBatch) -> _Written:
    """One synced write of ``batch`` and its outcome (an error is caught, not raised: the
    loop thread raises it in ``_written`` and the peer stops), on whichever thread runs it."""
    started = time.perf_counter()
    error: BaseException | None = None
    try:
        log.write_synced(batch, "ready")
    except BaseException as exc:
        error = exc
    return _Written(time.perf_counter() - started, error)


def _conforms(writes: StorageThread) -> DurableWrites:
    """mypy proves the storage thread satisfies the Protocol."""
    return writes
