"""The leader's gate for topic entries (issue #7): validate and stamp before proposing.

Why here and not in the state machine: a refused publish must never enter the log, and
only the proposer can keep it out; the state machine sees entries after they committed.
Why a publish is an update: the core's RequestUpdate path already gives idempotency (a
request id is appended at most once, across leader changes), the "accepted"/"done"
answers and the "not leader" answers on step-down. So both ways in -- ``TP`` (the publish
RPC, ``raftlog.topics.wire``) and ``=`` RequestUpdate whose data is a topic entry (what a
plain or reference client sends) -- are one path in ``ClientService``, and this gate is
what that path asks:

* ``check_publish``: the frames of a ``TP`` request (what the dispatcher checks for ``=``
  and drops silently is answered for ``TP``);
* ``prepare``: called by the core (``RaftCore.propose(prepare=...)``) only at the leader and
  only for a request id the log does not hold -- so a retry after a leader change gets the
  original index even if the topic changed since (idempotency first), and the request id is
  looked up once. It decodes, checks against the applied topics (``check_entry``), stamps
  the append time from the cluster clock (``raftlog.cluster_clock``; ``AppendClock``: never
  earlier than this leader's previous stamp) and
  the AUTO_CREATE flag from this peer's ``topic_auto_create`` option; a transaction entry
  is also checked against the open transactions (``TopicStateMachine.check_transaction``,
  with the stamp it would get, so a store or commit past its deadline is refused at once);
  ``needs_prepare`` tells the leader when a whole batch would pass through unchanged (plain
  data, disk not low), so that it proposes the batch without a call per update;
* ``refusal_at``: the state machine re-checks at apply, so an admin command committed in
  between can still refuse a batch, deterministically; its publisher is told.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Protocol

from raftlog.entry import REQUEST_ID_SIZE
from raftlog.server.disk_guard import DiskGuard
from raftlog.topics.groups.entry import GroupCommand
from raftlog.topics.groups.host import GroupHost
from raftlog.topics.record_scan import batch_fits, record_count, summarize_batch
from raftlog.topics.records import (
    ClockTick,
    RecordFormatError,
    TopicError,
    any_topic_data,
    is_topic_data,
)
from raftlog.topics.records_tx import TxControl, TxStore, decode_any_entry
from raftlog.topics.rules import check_entry
from raftlog.topics.stamp import AppendClock
from raftlog.topics.state import TopicState
from raftlog.topics.wire import bad_request


class TopicView(Protocol):
    """What the gate reads from the topic state machine."""

    @property
    def topics(self) -> Mapping[str, TopicState]:
        """The applied topics."""
        ...

    def refusal_at(self, index: int) -> TopicError | None:
        """Why the batch at ``index`` was refused at apply, if it was."""
        ...

    def check_transaction(self, entry: TxControl | TxStore, now_ms: int) -> TopicError | None:
        """Why a transaction entry stamped ``now_ms`` would be refused (issue #18)."""
        ...

    @property
    def groups(self) -> GroupHost:
        """The consumer groups (issue #27): a group command is checked against them."""
        ...


class TopicGate:
    """Validates and stamps topic entries for the leader (see the module docstring)."""

    def __init__(
        self,
        machine: TopicView,
        *,
        auto_create: bool,
        max_data: int,
        now_ms: Callable[[], int],
        max_records: int,
        disk: DiskGuard | None = None,
    ) -> None:
        """``now_ms`` is the cluster clock (``raftlog.cluster_clock.ClusterClock.now``): what
        entries are stamped with and transaction deadlines are judged by -- never a wall
        clock, whose steps expired records and transactions (issue #24). ``disk`` is the
        disk guard: while it says the disk is low, data is refused (``DiskFull``)."""
        self._disk = disk
        self._machine = machine
        self._auto_create = auto_create
        self._max_data = max_data
        self._max_records = max_records
        self._now_ms = now_ms
        self.clock = AppendClock()

    def prepare(self, data: bytes) -> bytes | TopicError:
        """The data to propose (stamped when it is a topic entry), or why not. The size
        limit is checked here too, not only where clients' requests arrive: the leader's own
        entries (the dead-letter mover's) come this way, and one over the limit was refused
        by every peer's storage, which exited (``raftlog.topics.groups.deadletter``)."""
        if len(data) > self._max_data:
            return self._too_large(len(data))
        count = record_count(data)  # from the array headers: before decoding any record
        if count is not None and count > self._max_records:
            return TopicError(
                "TooManyRecords",
                f"{count} records in one entry exceed max_records_per_entry "
                f"{self._max_records}: publish them in smaller batches",
            )
        if self._disk is not None and (full := self._disk.refusal(data)) is not None:
            return full
        if not is_topic_data(data):
            return data
        summary = summarize_batch(data)  # the common case, without a Record per record
        if summary is not None and batch_fits(summary, self._machine.topics, self._auto_create):
            return self.clock.stamp(data, self._now_ms(), auto_create=self._auto_create)
        try:
            entry = decode_any_entry(data)
        except RecordFormatError as exc:
            return exc
        if entry is None:  # unreachable: the magic was checked
            return data
        if isinstance(entry, ClockTick):  # issue #11: the leader's own (raftlog.topics.clock)
            return RecordFormatError("clock ticks are appended by the leader only")
        now = self._now_ms()
        if isinstance(entry, GroupCommand):  # issue #27: checked against the applied groups
            groups = self._machine.groups
            refusal = groups.table.check(entry, max(self.clock.last_ms, now), groups.source)
            return refusal if refusal is not None else self.clock.stamp(data, now)
        if isinstance(entry, TxControl | TxStore):  # the stamp it would get decides expiry
            error = self._machine.check_transaction(entry, max(self.clock.last_ms, now))
            if error is not None:
                return error
        error = check_entry(entry, self._machine.topics, self._auto_create)
        if error is not None:
            return error
        return self.clock.stamp(data, now, auto_create=self._auto_create)

    def needs_prepare(self, datas: Iterable[bytes]) -> bool:
        """Could :meth:`prepare` return anything but its argument for one of ``datas``? False
        only while the disk is not low and none of them is a topic entry: the leader then
        proposes the batch without ``prepare``, a Python call per update less (issue #28;
        a reference client's data is never a topic entry)."""
        if self._disk is not None and self._disk.low:
            return True
        return any_topic_data(datas)

    def check_publish(self, msg_id: bytes, args: Sequence[bytes]) -> TopicError | None:
        """Why the frames of a ``TP`` request are unacceptable, or None."""
        if len(msg_id) != REQUEST_ID_SIZE:
            return bad_request(f"the id frame of TP must be a {REQUEST_ID_SIZE}-byte request id")
        if len(args) != 1 or not is_topic_data(args[0]):
            return bad_request("TP takes exactly one frame: a topic entry (raftlog.topics.records)")
        if len(args[0]) > self._max_data:
            return self._too_large(len(args[0]))
        return None

    def _too_large(self, size: int) -> TopicError:
        return TopicError(
            "EntryTooLarge",
            f"entry data of {size} bytes exceeds max_log_entry_data_size {self._max_data}",
        )

    def refusal_at(self, index: int) -> TopicError | None:
        """Why the publish applied at ``index`` was refused by the state machine, or None
        (the leader checked it against topics that an admin command then changed)."""
        return self._machine.refusal_at(index)
