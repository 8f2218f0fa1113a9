"""``LoopThread``: the one event-loop-thread runner of the blocking clients, the Spark source
and the HTTP listener (issue #26)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from raftlog.client.runner import LoopThread


async def _numbers(n: int, closed: list[bool]) -> AsyncIterator[int]:
    try:
        for i in range(n):
            yield i
    finally:
        closed.append(True)


def test_run_returns_the_result_and_raises_the_error() -> None:
    runner = LoopThread("t-run")
    runner.start()
    try:
        assert runner.run(asyncio.sleep(0, "done")) == "done"

        async def fail() -> None:
            raise KeyError("x")

        with pytest.raises(KeyError):
            runner.run(fail())
    finally:
        runner.stop()
    assert not runner.running
    assert runner.loop.is_closed()


def test_a_call_from_the_loop_thread_is_refused_rather_than_deadlocking() -> None:
    runner = LoopThread("t-self", owner="Thing")
    runner.start()
    try:

        async def inner() -> str:
            try:
                runner.submit(asyncio.sleep(0))
            except RuntimeError as exc:
                return str(exc)
            return "accepted"

        assert runner.run(inner()) == "Thing cannot be used from its own event loop thread"
    finally:
        runner.stop()


def test_setup_errors_reach_start_and_teardown_runs_anyway() -> None:
    torn: list[bool] = []

    async def setup() -> None:
        raise OSError("port taken")

    async def teardown() -> None:
        torn.append(True)

    runner = LoopThread("t-setup", setup=setup, teardown=teardown)
    with pytest.raises(OSError, match="port taken"):
        runner.start()
    runner.stop()
    assert torn == [True]


def test_an_interrupted_wait_cancels_the_call() -> None:
    runner = LoopThread("t-cancel")
    runner.start()
    try:
        cancelled: list[bool] = []

        async def slow() -> None:
            try:
                await asyncio.sleep(60)
            except asyncio.CancelledError:
                cancelled.append(True)
                raise

        with pytest.raises(TimeoutError):
            runner.run(slow(), timeout=0.05)
        runner.run(asyncio.sleep(0.05))  # let the cancellation land
        assert cancelled == [True]
    finally:
        runner.stop()


def test_iterate_hands_items_over_in_batches_and_closes_a_stream_left_early() -> None:
    runner = LoopThread("t-iter")
    runner.start()
    try:
        closed: list[bool] = []
        assert list(runner.iterate(_numbers(10, closed), batch=4)) == list(range(10))
        assert closed == [True]
        early: list[bool] = []
        items = runner.iterate(_numbers(1000, early), batch=3)
        assert [next(items), next(items)] == [0, 1]
        items.close()  # the caller leaves: the stream is closed on the loop
        assert early == [True]
    finally:
        runner.stop()
