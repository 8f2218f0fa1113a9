"""The blocking faces delegate generically to the async clients (``raftlog.client.blocking``).

Fails when a public async method has neither a blocking twin nor a stated reason (a new
async method then needs one line, never a hand-written twin), when a twin's parameters
drift from its async method's, or when a blocking class leaves a hook unimplemented.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import AsyncIterator, Coroutine, Iterator
from typing import Any, TypeVar

import pytest

from raftlog.client.blocking import IteratingFace, _Delegating, blocking, blocking_iter
from raftlog.client.client import RaftClient
from raftlog.client.sync import SyncRaftClient
from raftlog.topics.client import TopicClient
from raftlog.topics.client_tx import Transaction
from raftlog.topics.sync_client import SyncTopicClient
from raftlog.topics.sync_client_tx import SyncTransaction

T = TypeVar("T")

FACES: list[tuple[type, type, dict[str, str]]] = [
    (RaftClient, SyncRaftClient, {
        "aclose": "close() also stops the loop thread",
        "leader_request": "takes a coroutine function to run on the loop (async callers only)",
    }),
    (TopicClient, SyncTopicClient, {
        "aclose": "close() also closes a SyncRaftClient it owns",
    }),
    (Transaction, SyncTransaction, {}),
]


def _name(value: object) -> str:
    return getattr(value, "__name__", "skip")


def public_async_methods(cls: type) -> set[str]:
    """Its own and its bases' (``RaftClient`` inherits ``leader_request``, ``peer_request``)."""
    return {
        name
        for klass in cls.__mro__
        for name, member in vars(klass).items()
        if not name.startswith("_") and inspect.iscoroutinefunction(member)
    }


@pytest.mark.parametrize(("async_cls", "sync_cls", "skip"), FACES, ids=_name)
def test_every_public_async_method_has_a_blocking_twin_or_a_reason(
    async_cls: type, sync_cls: type, skip: dict[str, str]
) -> None:
    missing = {name for name in public_async_methods(async_cls) if not hasattr(sync_cls, name)}
    assert missing == set(skip)


@pytest.mark.parametrize(("async_cls", "sync_cls", "skip"), FACES, ids=_name)
def test_the_twins_keep_the_async_parameters(
    async_cls: type, sync_cls: type, skip: dict[str, str]
) -> None:
    for name in public_async_methods(async_cls) - set(skip):
        if not isinstance(vars(sync_cls)[name], _Delegating):
            continue  # written by hand on purpose (e.g. a context manager)
        sync = inspect.signature(getattr(sync_cls, name)).parameters
        assert sync == inspect.signature(getattr(async_cls, name)).parameters, name


@pytest.mark.parametrize("cls", [SyncRaftClient, SyncTopicClient, SyncTransaction])
def test_the_blocking_classes_implement_every_hook(cls: type) -> None:
    assert not inspect.isabstract(cls), getattr(cls, "__abstractmethods__", None)


class Counter:
    """A tiny async object: what a new async client method looks like."""

    def __init__(self) -> None:
        self.total = 0

    async def add(self, n: int, *, times: int = 1) -> int:
        """Add ``n`` ``times`` times; the new total."""
        await asyncio.sleep(0)
        self.total += n * times
        return self.total

    async def count(self, upto: int) -> AsyncIterator[int]:
        for i in range(upto):
            yield i


class SyncCounter(IteratingFace):
    """The whole blocking twin of ``Counter``: one line per method."""

    add = blocking(Counter.add)
    count = blocking_iter(Counter.count, batch=2)  # type: ignore[arg-type]

    def __init__(self) -> None:
        self._counter = Counter()
        self.streams_closed = 0

    @property
    def _delegate(self) -> Counter:
        return self._counter

    def _run(self, coro: Coroutine[Any, Any, T]) -> T:
        return asyncio.run(coro)

    def _iterate(self, stream: AsyncIterator[T], batch: int) -> Iterator[T]:
        async def take() -> list[T]:
            return [item async for item in stream]

        return iter(asyncio.run(take()))


def test_a_one_line_twin_runs_the_coroutine_and_keeps_its_signature_and_doc() -> None:
    counter = SyncCounter()
    assert counter.add(2, times=3) == 6
    assert counter.add(1) == 7
    assert list(counter.count(5)) == [0, 1, 2, 3, 4]
    assert str(inspect.signature(counter.add)) == "(n: 'int', *, times: 'int' = 1) -> 'int'"
    assert SyncCounter.add.__doc__ == Counter.add.__doc__
    with pytest.raises(TypeError):
        counter.add("x")  # type: ignore[arg-type]  # the async method's own error
