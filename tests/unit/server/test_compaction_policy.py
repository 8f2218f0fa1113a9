"""CompactionPolicy: how far (applied, prune index, registered limits) and when."""

from __future__ import annotations

from server_fakes import EventRecorder

from raftlog.entry import EntryType, LogEntry
from raftlog.metrics import PeerMetrics
from raftlog.server.compaction import CompactionPolicy
from raftlog.storage.memory import MemoryLogStore
from raftlog.storage.memory_snapshot import MemorySnapshotStore

NOW_S = 1_700_000_000


def rid(n: int, seconds: int = NOW_S) -> bytes:
    return seconds.to_bytes(4, "big") + n.to_bytes(8, "big")


class Machine:
    """``SnapshotSource``: its snapshot names the index it was taken at."""

    def __init__(self, applied: int) -> None:
        self.last_applied = applied

    def snapshot(self, index: int) -> bytes:
        return f"state@{index}".encode()

    def snapshot_build(self, index: int) -> Build:
        self.build = Build(self.snapshot(index))
        return self.build


class Build:
    """A snapshot that takes three steps."""

    def __init__(self, data: bytes) -> None:
        self.data, self.steps, self.cancelled = data, 0, False

    def step(self, rows: int = 0) -> bytes | None:
        self.steps += 1
        return self.data if self.steps >= 3 and not self.cancelled else None


class Setup:
    def __init__(self, entries: int = 10, applied: int = 8, **options: int | None) -> None:
        self.log = MemoryLogStore()
        self.log.append(
            1, [LogEntry(rid(n), EntryType.STATE, 1 + n // 5, b"x") for n in range(1, entries + 1)]
        )
        self.snapshots = MemorySnapshotStore()
        self.machine = Machine(applied)
        self.events = EventRecorder()
        self.metrics = PeerMetrics()
        settings: dict[str, int | None] = {
            "threshold": None,
            "request_id_ttl": None,
            "request_id_cache_max": None,
        }
        settings.update(options)
        self.policy = CompactionPolicy(
            self.log,
            self.snapshots,
            self.machine,
            self.log.term_at,
            self.events,
            threshold=settings["threshold"],
            request_id_ttl=settings["request_id_ttl"],
            request_id_cache_max=settings["request_id_cache_max"],
            metrics=self.metrics,
        )


def test_remembered_request_ids_hold_compaction_back() -> None:
    s = Setup()
    assert s.policy.compact() is None  # the id of entry 1 is still remembered
    s.log.prune_request_ids(5)
    assert s.policy.compact() == 4
    meta = s.snapshots.meta()
    assert meta is not None and (meta.index, meta.term) == (4, 1)
    assert s.snapshots.read(0, meta.size) == b"state@4" and s.log.first_index == 5
    assert s.events.names() == ["log_compacted"]


def test_never_past_the_applied_index_nor_twice_to_the_same_index() -> None:
    s = Setup()
    s.log.prune_request_ids(100)
    assert s.policy.compact() == 8 and s.log.snapshot_index == 8
    assert s.policy.compact() is None
    assert s.metrics.compactions.value == 1  # counted once: the refusal is not a compaction
    assert s.metrics.compaction_seconds.labels().count == 1


def test_registered_limits_bound_the_target() -> None:
    s = Setup()
    s.log.prune_request_ids(100)
    s.policy.add_limit(lambda: 6)
    s.policy.add_limit(lambda: None)  # no opinion
    assert s.policy.target() == 6
    assert s.policy.compact() == 6


def test_housekeeping_prunes_then_compacts_at_the_threshold() -> None:
    s = Setup(threshold=9, request_id_cache_max=3)
    assert s.policy.housekeeping(NOW_S * 1000) is None  # 8 applied < threshold 9
    assert s.log.oldest_request_index() == 8  # ids of the last 3 entries kept
    s.machine.last_applied = 10
    assert s.policy.housekeeping(NOW_S * 1000) == 7  # bounded by the prune index
    assert s.policy.building == 7 and s.log.snapshot_index == 0  # built over timer passes
    s.policy.step()
    s.policy.step()
    assert s.log.snapshot_index == 0
    s.policy.step()
    assert s.log.snapshot_index == 7 and s.snapshots.meta() is not None
    assert s.policy.building is None


def test_a_compaction_under_way_answers_every_caller_or_gives_way() -> None:
    s = Setup(entries=10, applied=8)
    s.log.prune_request_ids(100)
    answers: list[int | None] = []
    s.policy.start(answers.append)
    s.policy.start(answers.append)  # a second "compact" while one is under way waits for it
    while s.policy.building is not None:
        s.policy.step()
    assert answers == [8, 8] and s.log.snapshot_index == 8
    s.log.append(11, [LogEntry(rid(11), EntryType.STATE, 3, b"x")])
    s.machine.last_applied = 10
    s.policy.start(answers.append)
    s.log.compact(10, 3)  # a snapshot from the leader went past it meanwhile
    while s.policy.building is not None:
        s.policy.step()
    assert answers[-1] is None and s.log.snapshot_index == 10
    s.log.append(12, [LogEntry(rid(12), EntryType.STATE, 3, b"x")])
    s.machine.last_applied = 11
    s.policy.start(answers.append)
    s.machine.build.cancelled = True  # a restore made it void
    s.policy.step()
    assert answers[-1] is None and s.log.snapshot_index == 10


def test_housekeeping_forgets_expired_request_ids() -> None:
    s = Setup(request_id_ttl=1000)
    s.policy.housekeeping((NOW_S + 10) * 1000)
    assert s.log.oldest_request_index() is None
