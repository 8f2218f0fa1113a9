"""RequestEntries streaming rules (docs/protocol.md §10.5) against an in-memory log and snapshot."""

from __future__ import annotations

import pytest
from server_fakes import RecordingReplies

from raftlog.entry import LogEntry
from raftlog.rpc.frames import decode_uint, unpack_json
from raftlog.rpc.messages import RequestEntries
from raftlog.server.entries_service import MAX_BATCH_BYTES, EntriesLimits, EntriesService
from raftlog.storage.memory import MemoryLogStore
from raftlog.storage.memory_snapshot import MemorySnapshotStore

R = b"route"
ID = b"\x05"


def entry(n: int, size: int = 10) -> LogEntry:
    return LogEntry(n.to_bytes(12, "big"), 0, 1, bytes([n % 256]) * size)


class Harness:
    def __init__(self, count: int = 0, size: int = 10, **limits: int) -> None:
        self.log = MemoryLogStore()
        self.snaps = MemorySnapshotStore()
        if count:
            self.log.append(1, [entry(n, size) for n in range(1, count + 1)])
        self.replies = RecordingReplies()
        self.svc = EntriesService(self.log, self.snaps, self.replies, EntriesLimits(**limits))

    @property
    def sent(self) -> list[list[bytes]]:
        """The answers as they went on the wire (id first)."""
        return [frames for _, frames in self.replies.frames()]

    def ask(
        self, msg: RequestEntries, applied: int, leader: bool = True, now: float = 0.0
    ) -> list[list[bytes]]:
        before = len(self.sent)
        self.svc.handle(R, ID, msg, leader=leader, leader_id="B", applied=applied, now=now)
        self.svc.pump(float("inf"), lambda: 0.0)  # batches go out from the loop's slice
        return self.sent[before:]


def summary(frames: list[bytes]) -> tuple[int, int, int]:
    """(status, last index, number of entries)."""
    return decode_uint(frames[1], 1), decode_uint(frames[3], 3), len(frames) - 4


def test_not_leader_answers_status_0_with_the_leader() -> None:
    h = Harness(5)
    assert h.ask(RequestEntries(0), applied=5, leader=False) == [[ID, b"\x00", b"\xa1B"]]


def test_a_follower_serves_committed_entries_to_any_peer_requests_only() -> None:
    """raftlog's any_peer extension: a follower streams up to its own applied index (never
    past its commit index); a request without the flag (a reference client) still gets
    "not leader"."""
    h = Harness(10)
    assert h.ask(RequestEntries(0), applied=6, leader=False) == [[ID, b"\x00", b"\xa1B"]]
    out = h.ask(RequestEntries(2, None, 0, True), applied=6, leader=False)
    assert [summary(f) for f in out] == [(1, 6, 4)]
    assert out[0][4:] == [entry(n).to_bytes() for n in range(3, 7)]
    h = Harness(10_000, size=1000, pipelines=2)  # a long stream: acknowledged batches
    out = h.ask(RequestEntries(0, None, 0, True), applied=9_000, leader=False)
    assert len(out) == 2
    more = h.ask(RequestEntries(summary(out[0])[1], None, 0, True), applied=9_000, leader=False)
    assert len(more) == 1 and summary(more[0])[0] == 2


def test_small_range_is_one_last_batch_served_up_to_applied_only() -> None:
    h = Harness(10)
    out = h.ask(RequestEntries(2), applied=7)
    assert [summary(f) for f in out] == [(1, 7, 5)]
    assert out[0][4:] == [entry(n).to_bytes() for n in range(3, 8)]
    assert h.svc.open_pipelines == 0


def test_at_or_beyond_applied_answers_empty_last_with_applied() -> None:
    h = Harness(10)
    assert [summary(f) for f in h.ask(RequestEntries(7), applied=7)] == [(1, 7, 0)]
    assert [summary(f) for f in h.ask(RequestEntries(9), applied=7)] == [(1, 7, 0)]


def test_count_bounds_the_stream() -> None:
    h = Harness(10)
    assert [summary(f) for f in h.ask(RequestEntries(2, count=3), applied=10)] == [(1, 5, 3)]


def test_pipelines_send_ahead_and_each_ack_releases_one_more_batch() -> None:
    h = Harness(10_000, size=1000, pipelines=5)  # ~130 entries per 128 KiB batch
    out = h.ask(RequestEntries(0), applied=10_000)
    assert len(out) == 5 and all(summary(f)[0] == 2 for f in out)
    first_last = summary(out[0])[1]
    more = h.ask(RequestEntries(first_last), applied=10_000)
    assert len(more) == 1 and summary(more[0])[1] - summary(more[0])[2] == summary(out[-1])[1]
    # a wrong ack (not the oldest unacknowledged batch) restarts from what it carries
    restarted = h.ask(RequestEntries(3), applied=10_000)
    assert summary(restarted[0])[1] - summary(restarted[0])[2] == 3


def test_acknowledging_everything_ends_with_status_1_and_closes_the_pipeline() -> None:
    h = Harness(3000, size=100)
    seen: list[int] = []
    pending = h.ask(RequestEntries(0), applied=3000)
    while pending:
        frames = pending.pop(0)
        status, last, count = summary(frames)
        seen += range(last - count + 1, last + 1)
        if status == 2:
            pending += h.ask(RequestEntries(last), applied=3000)
    assert seen == list(range(1, 3001))
    assert h.svc.open_pipelines == 0


def test_count_zero_stops_without_a_reply() -> None:
    h = Harness(10_000, size=1000)
    out = h.ask(RequestEntries(0), applied=10_000)
    assert h.svc.open_pipelines == 1
    assert h.ask(RequestEntries(summary(out[0])[1], count=0), applied=10_000) == []
    assert h.svc.open_pipelines == 0


def test_a_big_single_entry_pauses_the_pipeline_until_acknowledged() -> None:
    h = Harness(10, size=100_000, entry_size_limit_pipeline=65536)
    out = h.ask(RequestEntries(0), applied=10)
    assert [summary(f) for f in out] == [(2, 1, 1)]
    assert [summary(f) for f in h.ask(RequestEntries(1), applied=10)] == [(2, 2, 1)]


def test_idle_pipelines_expire_after_the_ttl() -> None:
    h = Harness(10_000, size=1000, ttl_ms=100)
    h.ask(RequestEntries(0), applied=10_000, now=0.0)
    h.svc.sweep(0.05)
    assert h.svc.open_pipelines == 1
    h.svc.sweep(10.0)
    assert h.svc.open_pipelines == 0


@pytest.mark.parametrize("offset", [0, 65536])
def test_compacted_range_streams_snapshot_chunks_then_hands_over_to_entries(offset: int) -> None:
    h = Harness(20)
    data = bytes(range(256)) * 600  # 153,600 bytes: chunks of 65536, 65536, 22528
    h.snaps.install(10, 1, data)
    h.log.compact(10, 1)
    out = h.ask(RequestEntries(0, snapshot_offset=offset or None), applied=20)
    offsets = [unpack_json(f[2])[0] for f in out]  # type: ignore[index]
    assert offsets == [offset, offset + 65536]
    assert all(decode_uint(f[1], 1) == 3 and decode_uint(f[3], 3) == 10 for f in out)
    assert unpack_json(out[0][2]) == [offset, len(data), 1]
    got = b"".join(f[4] for f in out)
    if offset == 0:  # the first ack (original prevIndex + next offset) releases the last chunk
        tail = h.ask(RequestEntries(0, snapshot_offset=65536), applied=20)
        got += tail[0][4]
        acks = [65536 * 2]
    else:
        acks = [offset + 65536]
    assert got == data[offset:]
    assert h.svc.open_pipelines == 1  # the final chunk is out, an earlier one is unacked
    for next_offset in acks:  # a late ack closes the stream; it never resends the last chunk
        assert h.ask(RequestEntries(0, snapshot_offset=next_offset), applied=20) == []
    assert h.svc.open_pipelines == 0
    after = h.ask(RequestEntries(10), applied=20)
    assert [summary(f) for f in after] == [(1, 20, 10)]


# -- sliced sending (issue #12, finding 4) ---------------------------------------------------


def open_streams(h: Harness, count: int, applied: int) -> None:
    for n in range(count):
        h.svc.handle(
            b"r%d" % n,
            ID,
            RequestEntries(0),
            leader=True,
            leader_id="B",
            applied=applied,
            now=0.0,
        )


def test_the_message_handler_sends_nothing_the_loop_slice_does() -> None:
    h = Harness(10_000, size=1000)
    open_streams(h, 100, 10_000)
    assert h.sent == [] and h.svc.has_due  # nothing read or sent inside the handler


def test_the_slice_stops_at_its_deadline_and_serves_streams_in_turn() -> None:
    h = Harness(10_000, size=1000, pipelines=5)
    open_streams(h, 10, 10_000)
    ticks = iter(range(1_000_000))
    sent = h.svc.pump(7, lambda: next(ticks))  # the clock passes the deadline after 8 batches
    assert sent == 8 and len(h.sent) == 8
    sent += h.svc.pump(float("inf"), lambda: 0.0)
    assert sent == 50  # 10 streams x a window of 5
    first_ten = h.sent[:10]
    assert all(summary(f)[1] == summary(first_ten[0])[1] for f in first_ten)  # one each first


def test_unacknowledged_bytes_are_capped_over_all_streams() -> None:
    h = Harness(10_000, size=1000, pipelines=5, max_unacked_bytes=300_000)
    open_streams(h, 50, 10_000)  # never read: 50 x 5 x ~128 KiB would be ~32 MB
    h.svc.pump(float("inf"), lambda: 0.0)
    assert 300_000 <= h.svc.unacked_bytes < 300_000 + MAX_BATCH_BYTES + 2000  # one batch over
    assert not h.svc.has_due  # the loop goes back to sleeping instead of spinning
    waiting = len(h.sent)
    h.svc.sweep(10.0)  # the silent streams expire and release their share
    assert h.svc.unacked_bytes == 0 and h.svc.open_pipelines == 0
    assert waiting < 50 * 5


def test_an_acknowledgement_releases_budget_for_waiting_streams() -> None:
    h = Harness(10_000, size=1000, pipelines=2, max_unacked_bytes=200_000)
    open_streams(h, 4, 10_000)
    h.svc.pump(float("inf"), lambda: 0.0)
    assert not h.svc.has_due
    first = h.sent[0]
    before = len(h.sent)
    h.svc.handle(
        b"r0",
        ID,
        RequestEntries(summary(first)[1]),
        leader=True,
        leader_id="B",
        applied=10_000,
        now=0.0,
    )
    assert h.svc.has_due
    h.svc.pump(float("inf"), lambda: 0.0)
    assert len(h.sent) > before
