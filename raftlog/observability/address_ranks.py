"""Connections grouped by client address, with the most crowded address at hand.

Why: a full HTTP listener makes room by evicting from the address that holds the most
connections (``raftlog.observability.guard``), so that a flood churns through its own
connections and not through a monitoring probe's. Under a flood from many addresses that
choice is made once per accepted connection; a scan over every address each time would
make the flood's cost grow with its breadth. Here each address sits in a bucket by its
count, so the most crowded one is found in constant time, and adding or dropping a
connection moves its address by one bucket.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Generic, TypeVar

T = TypeVar("T", bound=Hashable)


class AddressRanks(Generic[T]):
    """Items (connections) per address, oldest first, and the address holding the most."""

    __slots__ = ("_by_address", "_by_count", "_top")

    def __init__(self) -> None:
        self._by_address: dict[str, dict[T, None]] = {}
        """Each address's items in the order they were added (ordered sets)."""
        self._by_count: dict[int, dict[str, None]] = {}
        """The addresses holding exactly ``count`` items, for every count held."""
        self._top = 0
        """The largest count held (0: no item at all)."""

    def __len__(self) -> int:
        """How many addresses hold at least one item."""
        return len(self._by_address)

    def add(self, address: str, item: T) -> None:
        """Track ``item`` under ``address`` (newest of its address); a repeat is ignored."""
        items = self._by_address.setdefault(address, {})
        if item in items:
            return
        items[item] = None
        self._move(address, len(items) - 1, len(items))

    def discard(self, address: str, item: T) -> None:
        """Stop tracking ``item``; safe if it was never added or is already gone."""
        items = self._by_address.get(address)
        if items is None or item not in items:
            return
        del items[item]
        self._move(address, len(items) + 1, len(items))
        if not items:
            del self._by_address[address]

    def most_crowded(self) -> dict[T, None]:
        """The items of an address holding the most, oldest first (empty if none); among
        equally crowded addresses, the one that reached that count first."""
        if not self._top:
            return {}
        address = next(iter(self._by_count[self._top]))
        return self._by_address[address]

    def _move(self, address: str, old: int, new: int) -> None:
        if old:
            bucket = self._by_count[old]
            del bucket[address]
            if not bucket:
                del self._by_count[old]
        if new:
            self._by_count.setdefault(new, {})[address] = None
        if new > self._top:
            self._top = new
        elif old == self._top and old not in self._by_count:
            self._top = new  # it was the only address at the top; it is one below now
