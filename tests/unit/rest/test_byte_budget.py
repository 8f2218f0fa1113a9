"""The listeners' byte budget: holds at most its limit (anything while nothing is held),
wakes waiters when bytes come back, and gives up after a time-out holding nothing."""

from __future__ import annotations

import asyncio

from raftlog.web.byte_budget import ByteBudget


def test_anything_fits_alone_and_the_limit_holds_otherwise() -> None:
    budget = ByteBudget(100)
    assert budget.fits(1_000)  # nothing held: a request larger than the budget goes alone
    budget.take(60)
    assert budget.fits(40) and not budget.fits(41)
    budget.give(60)
    assert budget.held == 0


def test_a_waiter_gets_room_when_bytes_come_back_or_gives_up() -> None:
    async def body() -> None:
        budget = ByteBudget(100)
        assert await budget.acquire(80)
        late = asyncio.ensure_future(budget.acquire(30))
        await asyncio.sleep(0.01)
        assert not late.done() and budget.held == 80
        budget.give(80)
        assert await late and budget.held == 30
        assert not await budget.acquire(90, timeout=0.05)  # no room in time: nothing held
        assert budget.held == 30
    asyncio.run(body())


def test_exempt_holds_count_nothing_and_never_wait() -> None:
    async def body() -> None:
        budget = ByteBudget(100, exempt=10)
        assert budget.counted(10) == 0 and budget.counted(11) == 11
        assert await budget.acquire(budget.counted(100))  # the budget is full
        assert budget.counted(10) == 0 and await budget.acquire(0, timeout=0)  # still passes
        assert budget.held == 100
    asyncio.run(body())
