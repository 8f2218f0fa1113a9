"""Linearizable reads during a fault schedule, and their check (issue #29).

``LinearizableReader`` runs next to the ``Workload`` (its own thread and event loop): each
read first notes the highest log index acknowledged to any workload client so far (the
*target*: the newest write acknowledged before the read began), then reads that one entry
with ``consistency="linearizable"`` from a random peer -- the stale one too: a paused or
partitioned leader the clients still reach -- or from the leader. :func:`check_reads` then
flags every read that answered without the target (a state older than an acknowledged
write) or with other data than the write acknowledged there. Reads that fail or time out
are fine (a stale leader must refuse); the guard is that enough reads succeeded.
"""

from __future__ import annotations

import asyncio
import random
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass

from faults.history import Op
from faults.workload import Workload
from raftlog.client import IndexedEntry, RaftClient, SnapshotChunk
from raftlog.errors import RaftlogError

READERS = 3
"""Concurrent readers (each one read at a time), so that a pause or a partition meets some."""


@dataclass
class ReadOp:
    """One linearizable read: what it had to see, where it was sent, what it got."""

    invoke_t: float
    target_index: int
    target_data: bytes | None
    """The acknowledged entry data when known (plain updates; None for topic publishes)."""
    peer: str | None
    """The peer asked first (None: the leader)."""
    got_index: int | None = None
    """The index of the entry (or snapshot) served; None when the read got nothing."""
    got_data: bytes | None = None
    outcome: str = "info"
    """``ok`` (answered), ``fail`` (refused or timed out: allowed)."""


def target_of(ops: Sequence[Op], now: float) -> Op | None:
    """The acknowledged op with the highest index completed before ``now``."""
    acked = [
        op for op in ops
        if op.outcome == "ok" and op.index is not None
        and op.complete_t is not None and op.complete_t < now
    ]
    return max(acked, key=lambda op: op.index or 0, default=None)


def check_reads(reads: Sequence[ReadOp]) -> list[str]:
    """Every answered read that returned less than its target, or other data there."""
    problems = []
    for read in reads:
        if read.outcome != "ok":
            continue
        if read.got_index is None or read.got_index < read.target_index:
            problems.append(
                f"stale read from {read.peer or 'the leader'}: got {read.got_index}, but "
                f"{read.target_index} was acknowledged before the read began"
            )
        elif (
            read.got_index == read.target_index
            and read.target_data is not None
            and read.got_data is not None
            and read.got_data != read.target_data
        ):
            problems.append(f"read of {read.target_index} returned other data than acknowledged")
    return problems


class LinearizableReader:
    """Start with ``start()``, stop with ``stop()``; ``reads`` is the history."""

    def __init__(self, urls: Sequence[str], ident: str, workload: Workload, seed: int) -> None:
        self.urls = list(urls)
        self.ident = ident
        self.workload = workload
        self.rng = random.Random(seed)
        self.reads: list[ReadOp] = []
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name="reader", daemon=True)
        self.error: BaseException | None = None

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout: float = 30.0) -> None:
        self._stopping.set()
        self._thread.join(timeout)
        if self._thread.is_alive():
            raise AssertionError("the linearizable reader did not stop")
        if self.error is not None:
            raise AssertionError(f"the reader crashed: {self.error!r}") from self.error

    def _run(self) -> None:
        try:
            asyncio.run(self._main())
        except BaseException as exc:  # reported by stop()
            self.error = exc

    async def _main(self) -> None:
        await asyncio.gather(*(self._loop() for _ in range(READERS)))

    async def _loop(self) -> None:
        async with RaftClient(self.urls, self.ident, timeout=3.0) as client:
            while not self._stopping.is_set():
                target = target_of(self.workload.snapshot(), time.monotonic())
                if target is None or target.index is None:
                    await asyncio.sleep(0.05)
                    continue
                plain = target.client.startswith("w")  # writers: the entry data is op.data
                read = ReadOp(
                    time.monotonic(),
                    target.index,
                    target.data if plain else None,
                    self.rng.choice([*self.urls, None]),
                )
                self.reads.append(read)
                await self._read(client, read)

    async def _read(self, client: RaftClient, read: ReadOp) -> None:
        stream = client.request_entries(
            read.target_index - 1, 1, from_peer=read.peer, consistency="linearizable",
            timeout=3.0,
        )
        try:
            async with stream:
                async for item in stream:
                    if isinstance(item, IndexedEntry):
                        read.got_index, read.got_data = item.index, item.entry.data
                    elif isinstance(item, SnapshotChunk):
                        read.got_index = item.index  # the state at the snapshot's index
                    break
        except RaftlogError:
            read.outcome = "fail"
            return
        read.outcome = "ok"
