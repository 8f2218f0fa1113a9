"""ReadyExecutor: the one Ready order, one synced write per Ready, crash points, snapshots,
and what waits for a write that is still in flight (a storage thread)."""

from __future__ import annotations

from collections.abc import Sequence

from raftlog.consensus import (
    CommittedEntries,
    ConfigChanged,
    Event,
    LogAppend,
    Outbound,
    Ready,
    SendReply,
    SendRequest,
    SnapshotChunkWrite,
    SnapshotInstall,
    SnapshotOp,
)
from raftlog.entry import EntryType, LogEntry
from raftlog.rpc.messages import (
    AppendEntriesResponse,
    ConfigPayload,
    Peer,
    PeerRequest,
    PeerResponse,
    RequestVote,
)
from raftlog.server.ready_executor import ReadyExecutor
from raftlog.storage.base import HardState
from raftlog.storage.memory import MemoryHardStateStore, MemoryLogStore
from raftlog.storage.memory_snapshot import MemorySnapshotStore
from raftlog.storage.ready_store import MemoryReadyStore

VOTE = RequestVote("n1", 2, 0, 0)
ACK = AppendEntriesResponse(2, True)


def entries(first: int, count: int, term: int = 2) -> tuple[LogEntry, ...]:
    return tuple(
        LogEntry(n.to_bytes(12, "big"), EntryType.STATE, term, b"e%d" % n)
        for n in range(first, first + count)
    )


def ready(
    *,
    hard_state: HardState | None = None,
    snapshot_ops: tuple[SnapshotOp, ...] = (),
    append: LogAppend | None = None,
    messages_now: tuple[Outbound, ...] = (),
    messages_after_persist: tuple[Outbound, ...] = (),
    committed: CommittedEntries | None = None,
    events: tuple[Event, ...] = (),
) -> Ready:
    return Ready(
        None,
        hard_state,
        snapshot_ops,
        append,
        messages_now,
        messages_after_persist,
        committed,
        events,
    )


class Journal:
    """Everything the executor does, in order, from every side it touches."""

    def __init__(self) -> None:
        self.steps: list[str] = []


class JournalOutbox:
    def __init__(self, journal: Journal) -> None:
        self.journal = journal

    def connect(self, peers: Sequence[Peer]) -> None:
        self.journal.steps.append("connect " + ",".join(p.id for p in peers))

    def send_request(self, to: str, message: PeerRequest) -> None:
        self.journal.steps.append(f"request {to}")

    def send_reply(self, token: object, message: PeerResponse) -> None:
        self.journal.steps.append(f"reply {token}")


class JournalReadyStore:
    def __init__(self, journal: Journal, inner: MemoryReadyStore) -> None:
        self.journal = journal
        self.inner = inner

    def persist(
        self, hard_state: HardState | None, first_index: int, entries: Sequence[LogEntry] | None
    ) -> None:
        what = [n for n, v in (("hard_state", hard_state), ("entries", entries)) if v is not None]
        self.journal.steps.append("persist " + "+".join(what))
        self.inner.persist(hard_state, first_index, entries)


class JournalMachine:
    def __init__(self, journal: Journal) -> None:
        self.journal = journal
        self.last_applied = 0
        self.restored: list[tuple[int, int, bytes]] = []

    def apply(self, first_index: int, entries: Sequence[bytes], term: int) -> None:
        self.last_applied = first_index + len(entries) - 1
        self.journal.steps.append(f"apply {first_index}..{self.last_applied} term {term}")

    def restore(self, index: int, term: int, data: bytes) -> None:
        self.journal.steps.append(f"restore {index}")
        self.restored.append((index, term, data))
        self.last_applied = index


class JournalCore:
    """``ReadyCore`` handing out scripted Readies."""

    def __init__(self, journal: Journal, readies: list[Ready]) -> None:
        self.journal = journal
        self.readies = readies
        self.term = 2
        self.applied_to: list[int] = []

    def has_ready(self) -> bool:
        return bool(self.readies)

    def ready(self) -> Ready:
        return self.readies[0]

    def applied(self, index: int) -> None:
        self.applied_to.append(index)

    def dispatched(self, ready: Ready) -> None:
        assert self.readies.pop(0) is ready
        self.journal.steps.append("dispatched")

    def persisted(self, ready: Ready) -> None:
        self.journal.steps.append("persisted")

    def connect_to(self) -> tuple[Peer, ...]:
        """The configuration of the ConfigChanged event being carried out (no departing)."""
        for event in self.readies[0].events:
            if isinstance(event, ConfigChanged):
                return event.config.all_peers()
        return ()


class Setup:
    def __init__(
        self, *readies: Ready, crash_at: str | None = None, journal_commits: bool = False
    ) -> None:
        self.journal = Journal()
        self.log = MemoryLogStore()
        self.hard_state = MemoryHardStateStore()
        self.snapshots = MemorySnapshotStore()
        self.machine = JournalMachine(self.journal)
        self.core = JournalCore(self.journal, list(readies))
        self.applied: list[int] = []
        self.executor = ReadyExecutor(
            log=self.log,
            hard_state=self.hard_state,
            snapshots=self.snapshots,
            ready_store=JournalReadyStore(
                self.journal, MemoryReadyStore(self.log, self.hard_state)
            ),
            machine=self.machine,
            outbox=JournalOutbox(self.journal),
            on_applied=self.applied.append,
            on_committed=(
                (lambda index: self.journal.steps.append(f"committed {index}"))
                if journal_commits
                else None
            ),
            react=lambda r: self.journal.steps.append("react"),
            crash_point=lambda where: where == crash_at,
        )
        self.executor.core = self.core


def test_the_order_of_one_ready_with_one_synced_write() -> None:
    batch = entries(1, 3)
    config = ConfigPayload(new=(Peer("n1", "tcp://a"), Peer("n2", "tcp://b")))
    s = Setup(
        ready(
            hard_state=HardState(current_term=2, voted_for="n1"),
            append=LogAppend(3, batch[2:]),
            messages_now=(SendRequest("n2", VOTE),),
            messages_after_persist=(SendReply("tok", ACK),),
            committed=CommittedEntries(1, batch[:2]),
            events=(ConfigChanged(config, 0, True),),
        )
    )
    s.log.append(1, batch[:2])  # committed entries are durable here before they are handed out
    s.executor.drain()
    assert s.journal.steps == [
        "connect n1,n2",
        "request n2",
        "persist hard_state+entries",
        "dispatched",
        "reply tok",  # the answer the write promised leaves first ...
        "persisted",
        "apply 1..2 term 2",  # ... then the apply
        "react",
    ]
    assert s.log.last_index == 3 and s.hard_state.load().voted_for == "n1"
    assert (s.core.applied_to, s.applied, s.log.commit_floor) == ([2], [2], 2)
    assert s.hard_state.load().last_applied == 0  # remembered: no write of its own per apply
    s.executor.flush_applied()  # the driver's tick
    assert s.hard_state.load().last_applied == 2
    assert s.journal.steps[-1] == "react"  # the flush is not a synced Ready write


def test_the_next_write_carries_the_applied_index_without_a_write_of_its_own() -> None:
    s = Setup(
        ready(committed=CommittedEntries(1, entries(1, 2))),
        ready(append=LogAppend(3, entries(3, 3))),
    )
    s.log.append(1, entries(1, 2))
    s.executor.drain()
    assert s.hard_state.load().last_applied == 2
    assert s.journal.steps.count("persist hard_state+entries") == 1  # carried, not a write


def test_the_hard_state_carries_the_applied_index_the_machine_reached() -> None:
    s = Setup(
        ready(committed=CommittedEntries(1, entries(1, 4))),
        ready(hard_state=HardState(current_term=3, last_applied=0)),
    )
    s.log.append(1, entries(1, 4))
    s.executor.drain()
    assert s.hard_state.load() == HardState(current_term=3, last_applied=4)


def test_a_ready_without_writes_persists_nothing() -> None:
    s = Setup(ready(messages_after_persist=(SendReply("t", ACK),)))
    s.executor.drain()
    assert s.journal.steps == ["dispatched", "reply t", "react"]


def test_a_crash_before_persisting_leaves_the_ready_undone() -> None:
    s = Setup(
        ready(
            hard_state=HardState(current_term=5),
            append=LogAppend(1, entries(1, 1)),
            messages_now=(SendRequest("n2", VOTE),),
            messages_after_persist=(SendReply("t", ACK),),
        ),
        crash_at="before_persist",
    )
    s.executor.drain()
    assert s.journal.steps == ["request n2"]  # nothing durable, nothing promised, not taken
    assert s.log.last_index == 0 and s.hard_state.load().current_term == 0


def test_a_crash_after_persisting_promises_nothing() -> None:
    s = Setup(
        ready(
            hard_state=HardState(current_term=5),
            messages_after_persist=(SendReply("t", ACK),),
        ),
        crash_at="after_persist",
    )
    s.executor.drain()
    assert s.journal.steps == ["persist hard_state", "dispatched"]  # no reply
    assert s.hard_state.load().current_term == 5


def test_a_snapshot_ready_keeps_the_hard_state_first_then_installs_then_appends() -> None:
    data = b"snapshot-data"
    s = Setup(
        ready(
            hard_state=HardState(current_term=4),
            snapshot_ops=(
                SnapshotChunkWrite(7, 3, len(data), 0, data[:5]),
                SnapshotChunkWrite(7, 3, len(data), 5, data[5:]),
                SnapshotInstall(7, 3, finish_receive=True),
            ),
            append=LogAppend(8, entries(8, 2, term=4)),
        )
    )
    s.executor.drain()
    assert s.journal.steps == [
        "persist hard_state",
        "restore 7",
        "persist entries",
        "react",
        "dispatched",
        "persisted",
    ]
    assert s.machine.restored == [(7, 3, data)]
    assert (s.log.snapshot_index, s.log.last_index, s.core.applied_to) == (7, 9, [7])


def test_a_crash_before_restoring_leaves_the_snapshot_installed_but_unapplied() -> None:
    data = b"abc"
    s = Setup(
        ready(
            snapshot_ops=(
                SnapshotChunkWrite(7, 3, 3, 0, data),
                SnapshotInstall(7, 3, finish_receive=True),
            )
        ),
        crash_at="before_restore",
    )
    s.executor.drain()
    meta = s.snapshots.meta()
    assert meta is not None and meta.index == 7 and s.machine.restored == []
    assert s.core.applied_to == [] and "dispatched" not in s.journal.steps


def test_a_leaders_ready_answers_its_clients_before_its_own_write() -> None:
    batch = entries(1, 3)
    s = Setup(
        ready(
            append=LogAppend(3, batch[2:]),
            messages_now=(SendRequest("n2", VOTE),),
            committed=CommittedEntries(1, batch[:2]),
        ),
        journal_commits=True,
    )
    s.log.append(1, batch[:2])  # committed entries are durable here before they are handed out
    s.executor.drain()
    assert s.journal.steps == [
        "request n2",
        "committed 2",  # plain updates are answered before the apply (issue #28)
        "apply 1..2 term 2",  # the clients' answers need not wait for this Ready's fsync
        "persist hard_state+entries",  # the write carries the applied index just reached
        "react",
        "dispatched",
        "persisted",
    ]
    assert (s.applied, s.log.last_index) == ([2], 3)


def test_without_a_core_the_committed_term_is_the_last_entrys() -> None:
    s = Setup()
    s.executor.core = None
    batch = entries(1, 2, term=6)
    assert s.executor.execute(
        ready(append=LogAppend(1, batch), committed=CommittedEntries(1, batch))
    )
    assert s.journal.steps == ["persist entries", "apply 1..2 term 6", "react"]
    assert s.applied == [2]


class HeldWrites:
    """``DurableWrites`` whose writes stay in flight until ``complete(n)`` (a slow disk)."""

    def __init__(self, journal: Journal, inner: MemoryReadyStore, hard_state: MemoryHardStateStore):
        self.journal = journal
        self.inner = inner
        self.hard_state = hard_state
        self.queue: list[tuple[int, HardState | None, LogAppend | None]] = []
        self.submitted = 0
        self.done = 0
        self.waited = 0

    def submit(self, hard_state: HardState | None, append: LogAppend | None) -> int:
        self.submitted += 1
        self.queue.append((self.submitted, hard_state, append))
        self.journal.steps.append(f"submit {self.submitted}")
        return self.submitted

    def complete(self, count: int) -> None:
        for _ in range(count):
            ticket, hard_state, append = self.queue.pop(0)
            self.inner.persist(
                hard_state, append.first_index if append else 0, append.entries if append else None
            )
            self.done = ticket

    def durable(self) -> int:
        return self.done

    def wait(self) -> None:
        self.waited += 1
        self.complete(len(self.queue))

    def record_applied(self, index: int) -> None:
        self.hard_state.save_applied(index)

    def flush_applied(self) -> None:
        """``record_applied`` saved it at once."""


def held(*readies: Ready) -> tuple[Setup, HeldWrites]:
    s = Setup(*readies)
    writes = HeldWrites(s.journal, MemoryReadyStore(s.log, s.hard_state), s.hard_state)
    s.executor = ReadyExecutor(
        log=s.log,
        hard_state=s.hard_state,
        snapshots=s.snapshots,
        ready_store=JournalReadyStore(s.journal, MemoryReadyStore(s.log, s.hard_state)),
        machine=s.machine,
        outbox=JournalOutbox(s.journal),
        writes=writes,
        react=lambda r: s.journal.steps.append("react"),
    )
    s.executor.core = s.core
    return s, writes


def test_replies_wait_for_their_write_and_the_next_ready_is_taken_meanwhile() -> None:
    s, writes = held(
        ready(
            append=LogAppend(1, entries(1, 2)),
            messages_now=(SendRequest("n2", VOTE),),
            messages_after_persist=(SendReply("first", ACK),),
        ),
        ready(append=LogAppend(3, entries(3, 1)), messages_after_persist=(SendReply("2nd", ACK),)),
    )
    s.executor.drain()
    first_ready = ["request n2", "submit 1", "dispatched", "react"]
    assert s.journal.steps == [*first_ready, "submit 2", "dispatched", "react"]
    assert s.executor.waiting == 2 and s.log.last_index == 0
    writes.complete(1)
    s.executor.drain()
    assert s.journal.steps[-2:] == ["reply first", "persisted"]
    writes.complete(1)
    s.executor.drain()
    assert s.journal.steps[-2:] == ["reply 2nd", "persisted"] and s.executor.waiting == 0
    assert s.log.last_index == 3


def test_a_reply_without_writes_of_its_own_waits_for_the_write_in_flight_before_it() -> None:
    """A heartbeat's success reply promises the entries the write in flight holds."""
    s, writes = held(
        ready(append=LogAppend(1, entries(1, 2)), messages_after_persist=(SendReply("ae", ACK),)),
        ready(messages_after_persist=(SendReply("heartbeat", ACK),)),
    )
    s.executor.drain()
    assert not any(step.startswith("reply") for step in s.journal.steps)
    writes.complete(1)
    s.executor.drain()
    assert [step for step in s.journal.steps if step.startswith("reply")] == [
        "reply ae",
        "reply heartbeat",
    ]


def test_holding_takes_no_new_ready_while_a_write_is_in_flight() -> None:
    s, writes = held(
        ready(append=LogAppend(1, entries(1, 1))),
        ready(append=LogAppend(2, entries(2, 1))),
    )
    s.executor.drain(hold_while_writing=True)
    assert s.journal.steps.count("dispatched") == 1 and len(s.core.readies) == 1
    writes.complete(1)
    s.executor.drain(hold_while_writing=True)
    assert s.journal.steps.count("dispatched") == 2 and s.core.readies == []


def test_a_snapshot_ready_waits_for_every_write_in_flight_first() -> None:
    data = b"xyz"
    s, writes = held(
        ready(append=LogAppend(1, entries(1, 2))),
        ready(
            snapshot_ops=(
                SnapshotChunkWrite(7, 3, 3, 0, data),
                SnapshotInstall(7, 3, finish_receive=True),
            )
        ),
    )
    s.executor.drain()
    assert writes.waited == 1 and writes.queue == []
    assert s.journal.steps.count("persisted") == 2  # the write in flight, then the snapshot
    assert s.log.snapshot_index == 7
