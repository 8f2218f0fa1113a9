"""One conformance suite for every storage implementation (memory and RocksDB + file snapshots).

Each test runs once per implementation through the ``stores`` fixture; ``restart()`` reopens
the durable store from disk (or rebuilds the memory store from its synced state), so every
"after reopen" assertion checks what actually survives.
"""

from __future__ import annotations

import pytest
from storage_helpers import BASE_SECONDS, Stores, batch, checkpoint, entry, rid, terms

from raftlog.entry import ZERO_REQUEST_ID, LogEntry
from raftlog.errors import EntryTooLargeError, StorageError
from raftlog.rpc.messages import ConfigPayload, Peer
from raftlog.storage.base import HardState, SnapshotMeta


class TestLogStore:
    def test_empty_store(self, stores: Stores) -> None:
        log = stores.log
        assert (log.snapshot_index, log.snapshot_term, log.first_index, log.last_index) == (
            0,
            0,
            1,
            0,
        )
        assert log.term_at(0) == 0
        assert log.term_at(1) is None
        assert log.entries(1, 1) == []
        assert log.index_of_request(rid(1)) is None
        with pytest.raises(IndexError):
            log.entries(1, 2)

    def test_append_and_read_back(self, stores: Stores) -> None:
        written = batch(1, 1, 5) + batch(2, 6, 3)
        stores.log.append(1, written[:5])
        stores.log.append(6, written[5:])
        for _ in range(2):
            log = stores.log
            assert log.last_index == 8
            assert log.entries(1, 9) == written
            assert log.entries(3, 6) == written[2:5]
            assert [log.term_at(i) for i in range(0, 10)] == [0, 1, 1, 1, 1, 1, 2, 2, 2, None]
            assert log.raw_entries(2, 4) == [e.to_bytes() for e in written[1:3]]
            stores.restart()

    def test_unknown_entry_types_and_binary_data_round_trip(self, stores: Stores) -> None:
        odd = [
            LogEntry(rid(1), 0xFE, 3, bytes(range(256))),
            checkpoint(3),
            LogEntry(rid(2), 1, (1 << 56) - 1, b"\x00"),
        ]
        stores.log.append(1, odd)
        stores.restart()
        assert stores.log.entries(1, 4) == odd

    def test_append_position_is_checked(self, stores: Stores) -> None:
        stores.log.append(1, batch(1, 1, 3))
        with pytest.raises(IndexError):
            stores.log.append(5, batch(1, 5, 1))  # would leave a hole at 4
        with pytest.raises(IndexError):
            stores.log.append(0, batch(1, 0, 1))
        assert stores.log.last_index == 3

    def test_overwrite_truncates_the_suffix(self, stores: Stores) -> None:
        stores.log.append(1, batch(1, 1, 6))
        stores.log.append(4, batch(2, 40, 1))
        for _ in range(2):
            assert stores.log.last_index == 4
            assert terms(stores.log.entries(1, 5)) == [1, 1, 1, 2]
            assert stores.log.term_at(5) is None
            with pytest.raises(IndexError):
                stores.log.entries(1, 6)
            stores.restart()

    def test_empty_append_only_truncates(self, stores: Stores) -> None:
        stores.log.append(1, batch(1, 1, 3) + batch(2, 4, 2))
        stores.log.append(4, [])
        assert stores.log.last_index == 3
        assert stores.log.term_at(3) == 1
        stores.log.append(4, [])  # at last_index + 1: nothing to do
        stores.restart()
        assert stores.log.last_index == 3
        assert stores.log.term_at(3) == 1

    def test_range_bounds(self, stores: Stores) -> None:
        stores.log.append(1, batch(1, 1, 5))
        with pytest.raises(IndexError):
            stores.log.entries(0, 3)
        with pytest.raises(IndexError):
            stores.log.entries(4, 7)
        assert stores.log.entries(6, 6) == []
        assert stores.log.entries(3, 2) == []

    def test_byte_limit(self, stores: Stores) -> None:
        written = [entry(1, n, bytes(80)) for n in range(1, 11)]  # 100 bytes each
        stores.log.append(1, written)
        assert stores.log.entries(1, 11, max_bytes=350) == written[:3]
        assert stores.log.entries(1, 11, max_bytes=300) == written[:3]
        assert stores.log.entries(1, 11, max_bytes=299) == written[:2]
        assert stores.log.entries(4, 11, max_bytes=1) == written[3:4]  # always one
        assert stores.log.raw_entries(1, 11, max_bytes=250) == [e.to_bytes() for e in written[:2]]
        assert stores.log.entries(1, 11, max_bytes=10_000) == written

    def test_entry_size_limit(self, stores: Stores) -> None:
        stores.restart(max_entry_data_size=100)
        stores.log.append(1, [entry(1, 1, bytes(100))])
        with pytest.raises(EntryTooLargeError) as info:
            stores.log.append(2, [entry(1, 2), entry(1, 3, bytes(101))])
        assert (info.value.size, info.value.limit) == (101, 100)
        assert stores.log.last_index == 1  # nothing of the refused batch was written
        assert stores.log.index_of_request(rid(2)) is None

    def test_compaction_with_matching_term_keeps_the_suffix(self, stores: Stores) -> None:
        stores.log.append(1, batch(1, 1, 4) + batch(2, 5, 4))
        stores.log.compact(5, 2)
        for _ in range(2):
            log = stores.log
            assert (log.snapshot_index, log.snapshot_term) == (5, 2)
            assert (log.first_index, log.last_index) == (6, 8)
            assert log.term_at(5) == 2
            assert log.term_at(4) is None
            assert terms(log.entries(6, 9)) == [2, 2, 2]
            with pytest.raises(IndexError):
                log.entries(5, 7)
            # Idempotency outlives compaction: compacted entries' ids are still known.
            assert log.index_of_request(rid(2)) == 2
            assert log.index_of_request(rid(7)) == 7
            stores.restart()

    def test_compaction_with_other_term_discards_everything(self, stores: Stores) -> None:
        stores.log.append(1, batch(1, 1, 8))
        stores.log.compact(5, 3)
        for _ in range(2):
            log = stores.log
            assert (log.snapshot_index, log.snapshot_term, log.last_index) == (5, 3, 5)
            assert log.term_at(5) == 3
            assert log.term_at(6) is None
            assert log.index_of_request(rid(2)) is None
            assert log.index_of_request(rid(7)) is None
            stores.restart()
        stores.log.append(6, batch(3, 60, 2))
        assert terms(stores.log.entries(6, 8)) == [3, 3]

    def test_compaction_beyond_the_log_and_stale_compaction(self, stores: Stores) -> None:
        stores.log.append(1, batch(1, 1, 3))
        stores.log.compact(10, 4)
        assert (stores.log.first_index, stores.log.last_index) == (11, 10)
        stores.log.compact(7, 1)  # older than the current snapshot: nothing to do
        stores.log.compact(10, 4)
        assert (stores.log.snapshot_index, stores.log.snapshot_term) == (10, 4)
        stores.log.append(11, batch(4, 11, 1))
        assert stores.log.term_at(11) == 4

    def test_compact_whole_log_with_matching_last_entry(self, stores: Stores) -> None:
        stores.log.append(1, batch(1, 1, 3))
        stores.log.compact(3, 1)
        stores.restart()
        assert (stores.log.first_index, stores.log.last_index, stores.log.term_at(3)) == (4, 3, 1)
        stores.log.append(4, batch(2, 4, 1))
        assert stores.log.entries(4, 5) == [entry(2, 4)]

    def test_request_ids(self, stores: Stores) -> None:
        stores.log.append(1, [entry(1, 1), checkpoint(1), entry(1, 3)])
        assert stores.log.index_of_request(rid(1)) == 1
        assert stores.log.index_of_request(rid(3)) == 3
        assert stores.log.index_of_request(ZERO_REQUEST_ID) is None  # checkpoints not indexed
        stores.log.append(3, [entry(2, 30)])  # truncates entry 3
        assert stores.log.index_of_request(rid(3)) is None
        assert stores.log.index_of_request(rid(30)) == 3
        stores.log.append(4, [entry(2, 3)])  # the same id again, at another index
        stores.restart()
        assert stores.log.index_of_request(rid(1)) == 1
        assert stores.log.index_of_request(rid(3)) == 4
        assert stores.log.index_of_request(rid(30)) == 3
        assert stores.log.oldest_request_index() == 1

    def test_prune_request_ids(self, stores: Stores) -> None:
        stores.log.append(1, batch(1, 1, 6))
        stores.log.compact(4, 1)
        assert stores.log.prune_request_ids(3) == 2
        assert stores.log.index_of_request(rid(2)) is None
        assert stores.log.index_of_request(rid(3)) == 3
        assert stores.log.oldest_request_index() == 3
        assert stores.log.prune_request_ids(3) == 0

    def test_prune_expired_request_ids_stops_at_the_first_fresh_one(self, stores: Stores) -> None:
        old, fresh = BASE_SECONDS, BASE_SECONDS + 3600
        written = [
            LogEntry(rid(1, old), 0, 1, b"a"),
            LogEntry(rid(2, old), 0, 1, b"b"),
            LogEntry(rid(3, fresh), 0, 1, b"c"),
            LogEntry(rid(4, old), 0, 1, b"d"),  # expired, but behind a fresh one
        ]
        stores.log.append(1, written)
        now_ms = (fresh + 60) * 1000
        assert stores.log.prune_expired_request_ids(now_ms, ttl_ms=1800 * 1000) == 2
        assert stores.log.index_of_request(rid(1, old)) is None
        assert stores.log.index_of_request(rid(3, fresh)) == 3
        assert stores.log.index_of_request(rid(4, old)) == 4
        assert stores.log.prune_expired_request_ids(now_ms, ttl_ms=None) == 0

    def test_commit_floor(self, stores: Stores) -> None:
        stores.log.append(1, batch(1, 1, 6))
        stores.log.set_commit_floor(4)
        with pytest.raises(StorageError):
            stores.log.append(4, batch(2, 40, 3))  # would replace committed entry 4
        with pytest.raises(StorageError):
            stores.log.append(3, [entry(1, 3)])  # would drop committed entry 4
        with pytest.raises(StorageError):
            stores.log.compact(2, 9)  # would discard committed entries 3 and 4
        assert stores.log.entries(1, 7) == batch(1, 1, 6)
        stores.log.append(3, [entry(1, 3), entry(1, 4), entry(3, 50)])  # same terms: allowed
        stores.log.append(5, batch(3, 50, 1))
        assert terms(stores.log.entries(1, 6)) == [1, 1, 1, 1, 3]

    def test_closed_store_refuses_use(self, stores: Stores) -> None:
        stores.log.append(1, batch(1, 1, 1))
        stores.log.close()
        with pytest.raises(StorageError):
            stores.log.entries(1, 2)
        with pytest.raises(StorageError):
            stores.log.append(2, batch(1, 2, 1))
        stores.restart()  # closing twice is harmless
        assert stores.log.last_index == 1


class TestHardStateStore:
    def test_default_and_round_trip(self, stores: Stores) -> None:
        assert stores.hard_state.load() == HardState()
        peers = (Peer("a", "tcp://127.0.0.1:1"), Peer("b", "tcp://127.0.0.1:2"))
        states = [
            HardState(current_term=3, voted_for="a", last_applied=7),
            HardState(
                current_term=4,
                voted_for=None,
                config=ConfigPayload(peers[:1], old=peers),
                config_index=12,
                last_applied=11,
            ),
            HardState(current_term=1 << 60, voted_for="é", config=ConfigPayload(peers)),
        ]
        for state in states:
            stores.hard_state.save(state)
            assert stores.hard_state.load() == state
            stores.restart()
            assert stores.hard_state.load() == state


class TestSnapshotStore:
    def test_install_read_and_reopen(self, stores: Stores) -> None:
        snaps = stores.snapshots
        assert snaps.meta() is None
        with pytest.raises(StorageError):
            snaps.read(0, 1)
        data = bytes(range(256)) * 10
        assert snaps.install(9, 2, data) == SnapshotMeta(9, 2, len(data))
        stores.restart()
        snaps = stores.snapshots
        assert snaps.meta() == SnapshotMeta(9, 2, len(data))
        assert snaps.read(0, 10**6) == data
        assert snaps.read(100, 5) == data[100:105]
        assert snaps.read(len(data) - 2, 10) == data[-2:]
        assert snaps.read(len(data) + 5, 10) == b""
        snaps.install(12, 3, b"")
        stores.restart()
        assert stores.snapshots.meta() == SnapshotMeta(12, 3, 0)
        assert stores.snapshots.read(0, 10) == b""

    def test_incremental_receive(self, stores: Stores) -> None:
        snaps = stores.snapshots
        data = b"0123456789" * 3
        assert snaps.begin(5, 1, len(data)) == 0
        assert snaps.write_chunk(0, data[:10]) == 10
        assert snaps.write_chunk(0, data[:10]) == 10  # duplicate: refused, count unchanged
        assert snaps.write_chunk(20, data[20:]) == 10  # gap: refused
        assert snaps.begin(5, 1, len(data)) == 10  # same triple: continue
        assert snaps.write_chunk(10, data[10:20]) == 20
        with pytest.raises(StorageError):
            snaps.finish()  # incomplete
        assert snaps.write_chunk(20, data[20:] + b"extra") == 20  # overruns the total size
        assert snaps.write_chunk(20, data[20:]) == 30
        assert snaps.meta() is None  # nothing installed before finish
        assert snaps.finish() == SnapshotMeta(5, 1, 30)
        stores.restart()
        assert stores.snapshots.read(0, 100) == data

    def test_new_triple_discards_pending_receive(self, stores: Stores) -> None:
        snaps = stores.snapshots
        snaps.begin(5, 1, 4)
        snaps.write_chunk(0, b"ab")
        assert snaps.begin(6, 1, 4) == 0
        assert snaps.write_chunk(0, b"wxyz") == 4
        assert snaps.finish() == SnapshotMeta(6, 1, 4)
        assert snaps.read(0, 4) == b"wxyz"

    def test_pending_receive_does_not_survive_restart(self, stores: Stores) -> None:
        stores.snapshots.install(3, 1, b"old")
        stores.snapshots.begin(5, 1, 4)
        stores.snapshots.write_chunk(0, b"ab")
        stores.restart()
        assert stores.snapshots.meta() == SnapshotMeta(3, 1, 3)
        assert stores.snapshots.begin(5, 1, 4) == 0
        assert stores.snapshots.write_chunk(0, b"toolong") == 0
        with pytest.raises(StorageError):
            stores.snapshots.finish()
