"""raftlog_spark.worker_gc: the collector is paused exactly while a task produces batches
and restored however the task ends; the heap is frozen once per process."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest
from raftlog_spark import worker_gc
from raftlog_spark.worker_gc import collector_paused, settle_worker_heap


@pytest.fixture
def settled(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Keep the tests from freezing the test process's heap (the process counts as settled)."""
    monkeypatch.setitem(worker_gc._heap, "settled", True)
    assert gc.isenabled()
    yield
    gc.enable()


def test_paused_while_producing_and_restored_at_the_end(settled: None) -> None:
    states = [gc.isenabled() for _ in collector_paused(iter(range(3)))]
    assert states == [False, False, False]
    assert gc.isenabled()


def test_restored_when_closed_early_or_failing(settled: None) -> None:
    batches = collector_paused(iter(range(3)))
    next(batches)
    assert not gc.isenabled()
    batches.close()  # Spark stops reading (e.g. a LIMIT)
    assert gc.isenabled()

    def failing() -> Iterator[int]:
        yield 1
        raise RuntimeError("peer gone")

    with pytest.raises(RuntimeError):
        list(collector_paused(failing()))
    assert gc.isenabled()


def test_a_disabled_collector_stays_disabled(settled: None) -> None:
    gc.disable()
    assert list(collector_paused(iter(range(2)))) == [0, 1]
    assert not gc.isenabled()


def test_cycles_made_while_paused_are_collected_at_each_batch(settled: None) -> None:
    class Node:
        def __init__(self) -> None:
            self.me = self

    def batches() -> Iterator[int]:
        for n in range(3):
            Node()  # garbage only the cycle detector can free
            yield n

    counts = []
    for _ in collector_paused(batches()):
        counts.append(sum(isinstance(o, Node) for o in gc.get_objects(generation=0)))
    assert counts == [0, 0, 0]


def test_the_heap_is_frozen_once_per_process(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(worker_gc._heap, "settled", False)
    try:
        settle_worker_heap()
        frozen = gc.get_freeze_count()
        assert frozen > 0
        gc.unfreeze()
        settle_worker_heap()  # settled already: nothing frozen again
        assert gc.get_freeze_count() == 0
    finally:
        gc.unfreeze()
