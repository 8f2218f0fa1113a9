"""A min-heap with at most one live value per name: what "the earliest X over every topic
(or group)" is kept in when X changes one name at a time.

Why: the topic machine's periodic questions -- the next retention deadline, the lowest
retained index (``raftlog.topics.retention_schedule``), the next lease deadline over every
consumer group (``raftlog.topics.groups.table``) -- were answered by walking every topic or
group, and nothing bounds how many there are. Kept here, a change costs O(log n) and a look
O(1) plus the stale pairs it drops (each pushed once).
"""

from __future__ import annotations

import heapq

__all__ = ["KeyedMinHeap"]


class KeyedMinHeap:
    """At most one live value per name, the smallest on top; replaced values stay in the heap
    as stale pairs, skipped (and dropped) when they reach the top."""

    def __init__(self) -> None:
        self._heap: list[tuple[int, str]] = []
        self._value: dict[str, int] = {}

    def __len__(self) -> int:
        return len(self._value)

    def __contains__(self, name: object) -> bool:
        return name in self._value

    def set(self, name: str, value: int) -> None:
        """``name``'s value is now ``value`` (whatever it was)."""
        if self._value.get(name) != value:
            self._value[name] = value
            heapq.heappush(self._heap, (value, name))

    def lower(self, name: str, value: int) -> None:
        """``name``'s value is ``value`` unless it has a smaller one already."""
        current = self._value.get(name)
        if current is None or value < current:
            self.set(name, value)

    def forget(self, name: str) -> None:
        """``name`` has no value (its pairs in the heap go stale)."""
        self._value.pop(name, None)

    def clear(self) -> None:
        """No name has a value."""
        self._heap.clear()
        self._value.clear()

    def top(self) -> tuple[int, str] | None:
        """The smallest live ``(value, name)``, or None when no name has a value."""
        heap, live = self._heap, self._value
        while heap:
            value, name = heap[0]
            if live.get(name) == value:
                return value, name
            heapq.heappop(heap)  # stale: replaced or forgotten since it was pushed
        return None
