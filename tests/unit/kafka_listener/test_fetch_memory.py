"""The Kafka listener's Fetch answer budget: reserve, keep, defer, and the release of what
one request (one connection's task) holds -- never what another connection holds."""

from __future__ import annotations

import asyncio

from raftlog.kafka.fetch_memory import READ_RESERVE, FetchMemory
from raftlog.kafka.settings import MIN_FETCH_MEMORY
from raftlog.topics.reads import READ_BUDGET


def test_a_read_reserves_what_one_topic_read_may_return() -> None:
    assert READ_RESERVE == READ_BUDGET == MIN_FETCH_MEMORY


def test_reads_past_the_budget_are_deferred_and_counted() -> None:
    async def body() -> None:
        memory = FetchMemory(2 * READ_RESERVE)
        assert memory.reserve() and memory.reserve()
        assert not memory.reserve() and memory.deferred == 1
        memory.keep(100)  # one read kept 100 bytes: the rest of its reservation is free
        assert memory.held == READ_RESERVE + 100
        assert memory.reserve() is False  # still no room for a whole read
        memory.keep(READ_RESERVE + 7)  # a first record alone larger than a read's budget
        assert memory.held == READ_RESERVE + 107
        memory.release_request()
        assert memory.held == 0 and memory.reserve()
    asyncio.run(body())


def test_each_connection_releases_only_what_it_holds() -> None:
    async def body() -> None:
        memory = FetchMemory(8 * READ_RESERVE)

        async def connection(kept: int, go: asyncio.Event) -> None:
            assert memory.reserve()
            memory.keep(kept)
            await go.wait()
            memory.release_request()

        go_a, go_b = asyncio.Event(), asyncio.Event()
        first = asyncio.ensure_future(connection(1_000, go_a))
        second = asyncio.ensure_future(connection(50, go_b))
        await asyncio.sleep(0.01)
        assert memory.held == 1_050
        go_a.set()
        await first
        assert memory.held == 50  # the first released its 1,000 only
        go_b.set()
        await second
        assert memory.held == 0
    asyncio.run(body())
