"""CatchUp: a downloaded stream becomes Readies carried out by the production executor."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from raftlog.client import IndexedEntry, StreamItem
from raftlog.entry import EntryType, LogEntry
from raftlog.rpc.config import encode_config_payload
from raftlog.rpc.messages import ConfigPayload, Peer, SnapshotChunk
from raftlog.server import catch_up as catch_up_module
from raftlog.server.catch_up import CatchUp
from raftlog.storage.memory import MemoryHardStateStore, MemoryLogStore
from raftlog.storage.memory_snapshot import MemorySnapshotStore
from raftlog.storage.ready_store import MemoryReadyStore

CONFIG = ConfigPayload(new=(Peer("n1", "tcp://127.0.0.1:7001"), Peer("n9", "tcp://127.0.0.1:7009")))


class Machine:
    def __init__(self) -> None:
        self.last_applied = 0
        self.applied: list[tuple[int, int, int]] = []
        self.restored: list[tuple[int, int, bytes]] = []

    def apply(self, first_index: int, entries: Sequence[bytes], term: int) -> None:
        self.last_applied = first_index + len(entries) - 1
        self.applied.append((first_index, self.last_applied, term))

    def restore(self, index: int, term: int, data: bytes) -> None:
        self.restored.append((index, term, data))
        self.last_applied = index


class Setup:
    def __init__(self) -> None:
        self.log = MemoryLogStore()
        self.hard_state = MemoryHardStateStore()
        self.snapshots = MemorySnapshotStore()
        self.machine = Machine()
        self.catch_up = CatchUp(
            self.log,
            self.hard_state,
            self.snapshots,
            self.machine,
            MemoryReadyStore(self.log, self.hard_state),
        )


def stream(first: int, count: int, term: int, config_at: int | None = None) -> list[StreamItem]:
    items: list[StreamItem] = []
    for index in range(first, first + count):
        if index == config_at:
            entry = LogEntry(
                index.to_bytes(12, "big"), EntryType.CONFIG, term, encode_config_payload(CONFIG)
            )
        else:
            entry = LogEntry(index.to_bytes(12, "big"), EntryType.STATE, term, b"d")
        items.append(IndexedEntry(index, entry))
    return items


def test_entries_are_stored_applied_and_the_config_adopted(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(catch_up_module, "BATCH", 4)
    s = Setup()
    s.catch_up.store_stream(0, stream(1, 10, term=3, config_at=6))
    assert s.log.last_index == 10 and s.catch_up.entries == 10
    assert s.machine.applied == [(1, 4, 3), (5, 8, 3), (9, 10, 3)]
    saved = s.hard_state.load()
    assert (saved.current_term, saved.config, saved.config_index) == (3, CONFIG, 6)
    assert saved.last_applied == 10 and s.log.commit_floor == 10


def test_a_snapshot_first_then_the_entries_after_it() -> None:
    s = Setup()
    data = b"0123456789"
    items: list[StreamItem] = [
        SnapshotChunk(0, len(data), 4, 20, data[:6]),
        SnapshotChunk(6, len(data), 4, 20, data[6:]),
        *stream(21, 2, term=5),
    ]
    s.catch_up.store_stream(0, items)
    assert s.machine.restored == [(20, 4, data)]
    assert (s.log.snapshot_index, s.log.last_index) == (20, 22)
    assert s.hard_state.load().current_term == 5 and s.machine.last_applied == 22


def test_a_resumed_catch_up_continues_after_what_is_stored() -> None:
    s = Setup()
    s.catch_up.store_stream(0, stream(1, 3, term=1))
    s.catch_up.store_stream(3, stream(4, 2, term=2))
    assert s.log.last_index == 5 and s.machine.applied[-1] == (4, 5, 2)
