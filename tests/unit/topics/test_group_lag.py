"""Group lag counted a bounded slice per status view (``raftlog.topics.groups.lag``): the
counts equal walking every entry once the scans complete, no view spends more than its
budget however far groups lag, and a position that moved is counted from anew."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from test_groups import append, catch_up

from raftlog.storage.memory import MemoryLogStore
from raftlog.topics.client import admin_data, publish_data
from raftlog.topics.groups.client import group_data
from raftlog.topics.groups.lag import LAG_SCAN_BUDGET, SEEK_UNITS, LagCounts
from raftlog.topics.index import EntryRecords
from raftlog.topics.machine import TopicStateMachine
from raftlog.topics.records import Record, RecordId


class WalkedSource:
    """Topics as lists of index entries; counts every entry handed out."""

    def __init__(self, entries: dict[str, list[EntryRecords]]) -> None:
        self.entries = entries
        self.walked = 0

    def start(self, topic: str) -> RecordId:
        return RecordId(0, 0)

    def entries_from(self, topic: str, index: int) -> Iterator[EntryRecords]:
        for entry in self.entries[topic]:
            if entry.index >= index:
                self.walked += 1
                yield entry


def entries(first: int, count: int, positions: tuple[int, ...] = (0,)) -> list[EntryRecords]:
    return [EntryRecords(i, 0, 0, positions) for i in range(first, first + count)]


def test_counts_converge_to_the_full_walk_within_the_budget_per_view() -> None:
    source = WalkedSource({"big": entries(10, 1_000, (0, 1)), "small": entries(5, 3)})
    lags = LagCounts(budget=100, cap=10_000)
    wanted = [("g1", "big", RecordId(10, 1)), ("g2", "small", RecordId(0, 0))]
    views = 0
    while True:
        source.walked = 0
        got = lags.refresh(wanted, source)
        views += 1
        assert source.walked <= 100 + 2  # the budget (+ the entry that found it spent)
        if got[("g1", "big")]:
            break
        assert views < 100
    assert got == {("g1", "big"): 1_999, ("g2", "small"): 3}  # 2 per entry, after (10, 1)
    assert views >= 1_000 // 100  # it took several views: never all at once
    source.entries["big"] += entries(1_010, 5, (0, 1))  # published meanwhile
    for _ in range(views + 1):
        got = lags.refresh(wanted, source)
    assert got[("g1", "big")] == 2_009  # counted again, the new records included
    moved = [("g1", "big", RecordId(1_000, 0)), ("g2", "small", RecordId(0, 0))]
    for _ in range(3):
        got = lags.refresh(moved, source)
    assert got[("g1", "big")] == 2 * 15  # a commit: counted from the new position
    got = lags.refresh(moved[1:], source)
    assert got == {("g2", "small"): 3}  # a group no longer shown is forgotten


def test_a_count_stops_at_the_cap_and_every_group_gets_its_turn() -> None:
    """Ten groups each 500 entries behind, a budget of 60 units a view: every group's lag
    is counted within a bounded number of views (the walk resumes where it stopped, from
    the next group), and the cap of 200 entries ends each count at "at least 200"."""
    source = WalkedSource({f"t{n}": entries(1, 500) for n in range(10)})
    lags = LagCounts(budget=60, cap=200)
    wanted = [(f"g{n}", f"t{n}", RecordId(0, 0)) for n in range(10)]
    for _ in range(10 * (200 + SEEK_UNITS * 5) // 60 + 10):
        got = lags.refresh(wanted, source)
    assert set(got.values()) == {200}


def test_a_status_view_walks_a_bounded_slice_however_far_a_group_lags(tmp_path: Path) -> None:
    """A stream group 30,000 entries behind: each view of the real machine walks at most
    the budget of index entries (the full count walked all 30,000, every 200 ms: with
    200,000 behind ~0.5 s of the loop per view), and the views' lag reaches the exact
    count."""
    store = MemoryLogStore()
    append(store, admin_data("create", "jobs"))
    machine = TopicStateMachine(tmp_path / "m", store)
    try:
        for _ in range(30_000):
            append(store, publish_data([Record("jobs", b"x")]))
        append(store, group_data("create", "slow", {"mode": "stream", "topics": ["jobs"]}))
        catch_up(machine, store)
        index = machine._index
        real = index.entries
        walked = [0]

        def counted(topic: str, start_index: int) -> Iterator[EntryRecords]:
            for entry in real(topic, start_index):
                walked[0] += 1
                yield entry

        index.entries = counted  # type: ignore[method-assign]
        lag = 0
        for _ in range(60):
            walked[0] = 0
            (stat,) = machine.groups.stats(500)
            assert walked[0] <= LAG_SCAN_BUDGET + 1
            lag = stat[2]
            if lag:
                break
        assert lag == 30_000
    finally:
        machine.close()
