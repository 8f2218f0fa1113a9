"""``ApplySignal``: the peer's applied index, pushed from the consensus thread to asyncio
code that waits for new data (REST long polls, a follower's catch-up wait, push fetch).

Why a notification and not a timer: a long poll used to re-read its topic every 20 ms, so
1,000 idle polls cost a peer 15 times its idle CPU (issue #25). Now a waiting poll costs a
parked future: the consensus thread calls :meth:`ApplySignal.notify` after each applied
batch (an attribute store and, only when someone waits on a loop, one
``call_soon_threadsafe`` per loop -- coalesced, so a burst of batches wakes each loop once),
and the loop wakes exactly the waiters whose index was passed.

Thread rules: ``notify`` is called from one thread (the peer's loop); ``wait_beyond`` from
any asyncio loop(s). Each loop keeps its own waiters, touched only on that loop. Listeners
(:meth:`ApplySignal.listen`, e.g. the peer's parked ``TR`` reads) run synchronously in the
notifying thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
import threading
from collections.abc import Callable


class _LoopWaiters:
    """The waiters of one asyncio loop: a heap of (index, seq, future) woken once the
    applied index passes their index."""

    def __init__(self, loop: asyncio.AbstractEventLoop, signal: ApplySignal) -> None:
        self.loop = loop
        self.signal = signal
        self.waiting = 0
        """Live waiters (read by the notifying thread: an int, so a torn read is impossible)."""
        self.scheduled = False
        self._heap: list[tuple[int, int, asyncio.Future[None]]] = []
        self._seq = itertools.count()

    def poke(self) -> None:
        """From the notifying thread: schedule one wake-up on the loop if anyone waits."""
        if self.waiting and not self.scheduled:
            self.scheduled = True
            with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
                self.loop.call_soon_threadsafe(self._wake)

    def _wake(self) -> None:
        self.scheduled = False  # before reading applied: a later notify schedules again
        applied = self.signal.applied
        heap = self._heap
        while heap and heap[0][0] < applied:
            future = heapq.heappop(heap)[2]
            if not future.done():
                future.set_result(None)

    def add(self, index: int) -> asyncio.Future[None]:
        future: asyncio.Future[None] = self.loop.create_future()
        heap = self._heap
        if len(heap) > 2 * self.waiting + 64:  # timed-out waiters: drop them now and then
            heap[:] = [item for item in heap if not item[2].done()]
            heapq.heapify(heap)
        heapq.heappush(heap, (index, next(self._seq), future))
        self.waiting += 1
        return future

    def done(self) -> None:
        self.waiting -= 1
        if not self.waiting:
            self._heap.clear()


class ApplySignal:
    """The applied index of this peer and a way to wait for it to pass a given index."""

    def __init__(self, applied: int = 0) -> None:
        self.applied = applied
        """The last applied index notified (readable from any thread)."""
        self._loops: dict[asyncio.AbstractEventLoop, _LoopWaiters] = {}
        self._lock = threading.Lock()
        self._listeners: list[Callable[[int], None]] = []

    def listen(self, listener: Callable[[int], None]) -> None:
        """Call ``listener(applied)`` in the notifying thread after each notification (for
        code of that thread, which must not wait on a loop)."""
        self._listeners.append(listener)

    def notify(self, applied: int) -> None:
        """The state machine has applied up to ``applied`` (the consensus thread, after
        each applied batch)."""
        self.applied = applied
        for listener in self._listeners:
            listener(applied)
        for waiters in tuple(self._loops.values()):
            waiters.poke()

    def _waiters(self) -> _LoopWaiters:
        loop = asyncio.get_running_loop()
        found = self._loops.get(loop)
        if found is None:
            with self._lock:
                for old in [k for k in self._loops if k.is_closed()]:
                    del self._loops[old]
                found = self._loops.setdefault(loop, _LoopWaiters(loop, self))
        return found

    async def wait_beyond(self, index: int, timeout: float) -> bool:
        """Wait until the applied index is past ``index`` or ``timeout`` seconds passed;
        whether it is past."""
        if self.applied > index:
            return True
        if timeout <= 0:
            return False
        waiters = self._waiters()
        future = waiters.add(index)
        try:
            if self.applied > index:  # applied between the check and the registration
                return True
            await asyncio.wait((future,), timeout=timeout)
            return self.applied > index
        finally:
            future.cancel()
            waiters.done()

    async def wait_for(self, index: int, timeout: float) -> bool:
        """Wait until ``index`` itself is applied (at most ``timeout``); whether it is."""
        return await self.wait_beyond(index - 1, timeout)
