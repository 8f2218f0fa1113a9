"""The clients of a fault schedule: writers and topic publishers that record a history.

Each client proposes one op at a time (so its own acks are ordered) with a fresh request id,
and retries the *same* id after a timeout or a lost leader until it gets a definite answer or
the run ends — the exactly-once promise is checked across exactly these retries. Every op is
recorded as a ``faults.history.Op`` (invoke and completion times on the monotonic clock,
outcome, index, attempts).

The workload runs its own asyncio loop in a thread, so a schedule written as plain blocking
code (kill, pause, partition, wait) injects faults while the clients keep going.
"""

from __future__ import annotations

import asyncio
import itertools
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass

from faults.history import Op
from faults.transactions import Tx, transactor
from raftlog.client import RaftClient
from raftlog.errors import ClientClosedError, RaftlogError, RequestExpiredError
from raftlog.topics.client import TopicClient
from raftlog.topics.records import TopicError

TOPIC = "chaos"


@dataclass
class WorkloadSpec:
    writers: int = 3
    publishers: int = 1
    """Topic publishers (records to ``TOPIC``; topics must auto-create)."""
    op_timeout: float = 4.0
    """Seconds one attempt may take (the client retries inside it) before the op is retried
    with the same request id."""
    transactors: int = 0
    """Clients running transactions (begin, 3 stores, commit; ``faults.transactions``)."""
    pace: float = 0.0
    """Seconds each client waits between its ops (0: as fast as acks come)."""


class Workload:
    """Start with ``start()``, stop with ``stop()``; ``ops`` is the history."""

    def __init__(self, urls: Sequence[str], ident: str, spec: WorkloadSpec | None = None) -> None:
        self.urls = list(urls)
        self.ident = ident
        self.spec = spec or WorkloadSpec()
        self.ops: list[Op] = []
        self.txs: list[Tx] = []
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self.error: BaseException | None = None

    # -- control (from the schedule's thread) ----------------------------------------------
    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="workload", daemon=True)
        self._thread.start()
        self._ready.wait(10)

    def stop(self, timeout: float = 30.0) -> None:
        if self._loop is not None and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        if self._thread is not None:
            self._thread.join(timeout)
            if self._thread.is_alive():
                raise AssertionError("workload did not stop")
        if self.error is not None:
            raise AssertionError(f"workload crashed: {self.error!r}") from self.error

    def acked(self, since: float = 0.0) -> int:
        """Ops acknowledged at or after monotonic time ``since``."""
        with self._lock:
            return sum(1 for op in self.ops if op.outcome == "ok" and (op.complete_t or 0) >= since)

    def snapshot(self) -> list[Op]:
        with self._lock:
            return list(self.ops)

    # -- the clients -----------------------------------------------------------------------
    def _run(self) -> None:
        try:
            asyncio.run(self._main())
        except BaseException as exc:  # reported by stop()
            self.error = exc

    async def _main(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        self._ready.set()
        tasks = [asyncio.create_task(self._writer(f"w{n}")) for n in range(self.spec.writers)]
        tasks += [
            asyncio.create_task(self._publisher(f"p{n}")) for n in range(self.spec.publishers)
        ]
        tasks += [
            asyncio.create_task(
                transactor(
                    f"t{n}", self.urls, self.ident, self._stop, self.txs, self._lock,
                    self.spec.op_timeout,
                )
            )
            for n in range(self.spec.transactors)
        ]
        await self._stop.wait()
        await asyncio.gather(*tasks)

    async def _client_loop(self, name: str, propose_kind: str) -> None:
        assert self._stop is not None
        stop = self._stop
        async with RaftClient(self.urls, self.ident, timeout=self.spec.op_timeout) as client:
            topics = TopicClient(client) if propose_kind == "publish" else None
            try:
                seq = 0
                while not stop.is_set():
                    seq += 1
                    data = f"{name}-{seq}".encode()
                    op = Op(name, seq, client.new_request_id(), data, time.monotonic())
                    with self._lock:
                        self.ops.append(op)
                    await self._propose(op, client, topics, stop)
                    if self.spec.pace:
                        await asyncio.sleep(self.spec.pace)
            finally:
                if topics is not None:
                    await topics.aclose()

    async def _propose(
        self, op: Op, client: RaftClient, topics: TopicClient | None, stop: asyncio.Event
    ) -> None:
        """Until a definite answer or the end of the run: same request id every attempt."""
        while True:
            try:
                if topics is None:
                    index = await client.request_update(op.data, op.request_id)
                else:
                    rid = await topics.publish(TOPIC, op.data, request_id=op.request_id)
                    index = rid.index
            except (RequestExpiredError, TopicError):
                op.outcome, op.complete_t = "fail", time.monotonic()
                return
            except ClientClosedError:
                return
            except RaftlogError:
                if stop.is_set():
                    return  # stays "info": it may or may not have landed
                op.attempts += 1
                continue
            op.outcome, op.index, op.complete_t = "ok", index, time.monotonic()
            return

    async def _writer(self, name: str) -> None:
        await self._client_loop(name, "update")

    async def _publisher(self, name: str) -> None:
        await self._client_loop(name, "publish")


def max_unavailability(ops: Sequence[Op], start: float, end: float) -> float:
    """The longest time in ``[start, end]`` without any acknowledgement (seconds)."""
    marks = sorted(
        op.complete_t
        for op in ops
        if op.outcome == "ok" and op.complete_t is not None and start <= op.complete_t <= end
    )
    points = [start, *marks, end]
    return max((b - a for a, b in itertools.pairwise(points)), default=0.0)
