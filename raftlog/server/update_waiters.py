"""The updates a leader still has to answer, by the log index their entry has.

``ClientService`` keeps two of these: plain RequestUpdates (``=``), answered as soon as their
entry is committed -- before the state machine applies it -- and topic publishes (``TP``),
answered once applied, because only the apply decides whether a publish was refused (a
conditional publish, a closed transaction). Why the plain ones need not wait for the apply
(issue #28): the answer says "committed at ``index``", which is true once a majority holds
the entry; and the loop that sends it also applies the entry in the same pass, before it
reads the next request, so nothing this peer answers afterwards can miss the entry. What
the apply costs (the topic index, the broadcast, the applied mark) then no longer delays
the answer of a client with one update in flight.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterator

Waiter = tuple[bytes, bytes, bool]
"""(routing id, request id, is a ``TP`` publish)."""


class UpdateWaiters:
    """Waiters by index, released in index order (a heap of the indexes that have any)."""

    __slots__ = ("_by_index", "_heap", "_since")

    def __init__(self) -> None:
        self._by_index: dict[int, list[Waiter]] = {}
        self._heap: list[int] = []
        self._since: dict[int, float] = {}
        """When the first waiter of each index was accepted (the latency histogram)."""

    def __len__(self) -> int:
        return sum(len(waiters) for waiters in self._by_index.values())

    def add(self, index: int, waiter: Waiter, now: float) -> None:
        """Wait for ``index``; a retry of a request already waiting there is not added twice."""
        waiters = self._by_index.get(index)
        if waiters is None:
            self._by_index[index] = [waiter]
            self._since[index] = now
            heapq.heappush(self._heap, index)
        elif all(w[:2] != waiter[:2] for w in waiters):
            waiters.append(waiter)

    def due(self, through: int) -> bool:
        """Whether any waiter waits for an index at or below ``through``."""
        heap = self._heap
        return bool(heap) and heap[0] <= through

    def release(self, through: int, now: float) -> Iterator[tuple[int, float, list[Waiter]]]:
        """Remove and yield ``(index, seconds waited, waiters)`` for every index up to
        ``through``, lowest first."""
        heap, by_index, since = self._heap, self._by_index, self._since
        pop = heapq.heappop
        while heap and heap[0] <= through:
            index = pop(heap)
            yield index, now - since.pop(index, now), by_index.pop(index, [])

    def drain(self) -> Iterator[Waiter]:
        """Remove and yield every waiter (leadership lost)."""
        waiting = list(self._by_index.values())
        self._by_index.clear()
        self._heap.clear()
        self._since.clear()
        for waiters in waiting:
            yield from waiters
