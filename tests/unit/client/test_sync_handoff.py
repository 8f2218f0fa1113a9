"""SyncRaftClient hands stream items to its caller in chunks (raftlog.client.sync).

Why: one thread handoff per entry capped a joining peer's catch-up at ~20k entries/s. The
chunking must not lose an item, reorder them, or swallow the error that ended a stream.
"""

from __future__ import annotations

import asyncio
from typing import Any, cast

import pytest

from raftlog.client.entries import EntryStream
from raftlog.client.runner import next_items as _next_items


class _FakeStream:
    """Yields ``items``, then raises ``error`` (or ends)."""

    def __init__(self, items: list[int], error: Exception | None = None) -> None:
        self._items = list(items)
        self._error = error

    async def __anext__(self) -> int:
        await asyncio.sleep(0)
        if self._items:
            return self._items.pop(0)
        if self._error is not None:
            error, self._error = self._error, None
            raise error
        raise StopAsyncIteration


def _take(stream: Any, limit: int) -> tuple[list[Any], bool, BaseException | None]:
    return asyncio.run(_next_items(cast(EntryStream, stream), limit))


def test_items_come_in_chunks_in_order_until_the_end() -> None:
    stream = _FakeStream(list(range(5)))
    assert _take(stream, 2) == ([0, 1], False, None)
    assert _take(stream, 2) == ([2, 3], False, None)
    assert _take(stream, 2) == ([4], True, None)


def test_an_error_after_some_items_is_returned_after_them() -> None:
    boom = TimeoutError("no leader")
    items, ended, error = _take(_FakeStream([1, 2], boom), 10)
    assert (items, ended, error) == ([1, 2], True, boom)


def test_an_error_before_any_item_is_raised() -> None:
    with pytest.raises(TimeoutError):
        _take(_FakeStream([], TimeoutError("no leader")), 10)
