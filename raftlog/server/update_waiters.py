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
from collections import deque
from collections.abc import Iterator

Waiter = tuple[bytes, bytes, bool]
"""(routing id, request id, is a ``TP`` publish)."""


class WaiterRun:
    """The waiters of one proposal batch's appended updates: one at each index from
    ``first`` on, all accepted at ``since``. Issue #28: a leader at 128 in flight appends
    ~50 updates per batch; held as one run, they cost one queue entry, one interim-accept
    entry and one latency observation instead of a heap entry and the rest each."""

    __slots__ = ("first", "since", "taken", "waiters")

    def __init__(self, first: int, waiters: list[Waiter], since: float) -> None:
        self.first = first
        self.waiters = waiters
        self.since = since
        self.taken = 0
        """How many of ``waiters`` (from the front) were released already."""

    @property
    def end(self) -> int:
        """The index after the run's last."""
        return self.first + len(self.waiters)


class UpdateWaiters:
    """Waiters by index, released in index order: a heap of the indexes that have any, and
    runs of a batch's appended updates (``add_run``) in a queue of their own."""

    __slots__ = ("_by_index", "_heap", "_runs", "_since")

    def __init__(self) -> None:
        self._by_index: dict[int, list[Waiter]] = {}
        self._heap: list[int] = []
        self._since: dict[int, float] = {}
        """When the first waiter of each index was accepted (the latency histogram)."""
        self._runs: deque[WaiterRun] = deque()
        """Runs in index order, none overlapping (``add_run`` keeps it so)."""

    def __len__(self) -> int:
        in_runs = sum(len(run.waiters) - run.taken for run in self._runs)
        return in_runs + sum(len(waiters) for waiters in self._by_index.values())

    def add(self, index: int, waiter: Waiter, now: float) -> None:
        """Wait for ``index``; a retry of a request already waiting there is not added twice."""
        if self._in_run(index, waiter):
            return
        waiters = self._by_index.get(index)
        if waiters is None:
            self._by_index[index] = [waiter]
            self._since[index] = now
            heapq.heappush(self._heap, index)
        elif all(w[:2] != waiter[:2] for w in waiters):
            waiters.append(waiter)

    def add_run(self, first: int, waiters: list[Waiter], now: float) -> None:
        """Wait for ``first``, ``first + 1``, ... with one waiter each (``waiters`` is kept,
        not copied). A leader's appended indexes only grow, so a run starts after every run
        before it; one that does not is added index by index. The waiters are requests just
        appended, so none waits anywhere yet: a retry of one is ``add``-ed after the run
        (``ClientService.propose_queued`` settles a batch's duplicates after its run)."""
        runs = self._runs
        if runs and runs[-1].end > first:
            for offset, waiter in enumerate(waiters):
                self.add(first + offset, waiter, now)
            return
        runs.append(WaiterRun(first, waiters, now))

    def _in_run(self, index: int, waiter: Waiter) -> bool:
        """Whether ``waiter``'s request waits at ``index`` in a run already (a retry)."""
        for run in reversed(self._runs):
            if run.first + run.taken <= index < run.end:
                return run.waiters[index - run.first][:2] == waiter[:2]
            if index >= run.end:
                return False
        return False

    def due(self, through: int) -> bool:
        """Whether any waiter waits for an index at or below ``through``."""
        heap, runs = self._heap, self._runs
        if heap and heap[0] <= through:
            return True
        return bool(runs) and runs[0].first + runs[0].taken <= through

    def release(self, through: int, now: float) -> Iterator[tuple[int, float, list[Waiter]]]:
        """Remove and yield ``(index, seconds waited, waiters)`` for every index up to
        ``through`` held one by one, lowest first (``release_runs`` yields the runs)."""
        heap, by_index, since = self._heap, self._by_index, self._since
        pop = heapq.heappop
        while heap and heap[0] <= through:
            index = pop(heap)
            yield index, now - since.pop(index, now), by_index.pop(index, [])

    def release_runs(
        self, through: int, now: float
    ) -> Iterator[tuple[int, float, list[Waiter]]]:
        """Remove and yield ``(first index, seconds waited, waiters)`` of the runs' waiters
        up to ``through``, lowest first: the waiters wait at ``first``, ``first + 1``, ...
        (a run released in part keeps the rest)."""
        runs = self._runs
        while runs and (run := runs[0]).first + run.taken <= through:
            start = run.first + run.taken
            if run.end - 1 <= through:
                runs.popleft()
                taken = run.waiters[run.taken :] if run.taken else run.waiters
            else:
                stop = through + 1 - run.first
                taken = run.waiters[run.taken : stop]
                run.taken = stop
            yield start, now - run.since, taken

    def drain(self) -> Iterator[Waiter]:
        """Remove and yield every waiter (leadership lost)."""
        waiting = list(self._by_index.values())
        waiting.extend(run.waiters[run.taken :] for run in self._runs)
        self._by_index.clear()
        self._heap.clear()
        self._since.clear()
        self._runs.clear()
        for waiters in waiting:
            yield from waiters
