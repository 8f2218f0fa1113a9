"""``TopicMachineViews``: what the topic machine answers from the state it keeps.

Why apart: ``raftlog.topics.machine`` holds what every peer does with the log (apply,
snapshot, restore, housekeeping); the views here only read what apply decided -- the applied
position and log clock, the reads (``TR``, ``TD``, ``TC``, ``TS``), and the questions the
leader's gate and the driver ask (``refusal_at``, ``check_transaction``,
``compaction_limit``, ``next_expiry``). ``TopicStateMachine`` inherits them, as ``RaftCore``
does ``CoreViews``.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping, Sequence

from raftlog.errors import TopicError
from raftlog.statemachine.base import built_at_once
from raftlog.topics import wire as rpc
from raftlog.topics import wire_counts as topic_counts
from raftlog.topics import wire_tx as tx_rpc
from raftlog.topics.groups.host import GroupHost
from raftlog.topics.index import TopicIndex
from raftlog.topics.kv_state import KeyValueState
from raftlog.topics.names import SortedNames
from raftlog.topics.reads import TopicReader
from raftlog.topics.records_tx import TxControl, TxStore
from raftlog.topics.retention_schedule import RetentionSchedule
from raftlog.topics.snapshot_build import SnapshotBuild
from raftlog.topics.state import TopicState
from raftlog.topics.tx import TransactionTable


class TopicMachineViews:
    """The read side of ``TopicStateMachine``: answers, no decisions (module docstring)."""

    _applied: int
    _last_time: int
    _topics: dict[str, TopicState]
    _is_leader: bool
    _recent_refusals: OrderedDict[int, TopicError]
    _tx: TransactionTable
    _reader: TopicReader
    _index: TopicIndex
    _schedule: RetentionSchedule
    _names: SortedNames
    _builds: set[SnapshotBuild]
    _base_time: int
    kv: KeyValueState
    groups: GroupHost

    # -- state -----------------------------------------------------------------------------
    @property
    def last_applied(self) -> int:
        """Index of the last entry applied to the topic index."""
        return self._applied

    @property
    def last_time(self) -> int:
        """The log clock (``raftlog.cluster_clock``): the latest cluster time stamped in the
        applied log. Every time-based decision (retention, TTL, transaction timeouts, leases,
        request-id expiry) is taken against it: the same log, the same decision everywhere."""
        return self._last_time

    @property
    def topics(self) -> Mapping[str, TopicState]:
        """The topics as of the applied index (the leader's gate checks publishes against it)."""
        return self._topics

    def list_answer(self, patterns: Sequence[str] | None) -> list[bytes]:
        """``TL``'s answer: every topic's name, or those ``patterns`` match, in order (the
        unfiltered answer kept until the topic set changes: ``raftlog.topics.names``)."""
        return self._names.list_answer(self._topics, patterns, rpc.encode_list_response)

    def refusal_at(self, index: int) -> TopicError | None:
        """Why the record batch at ``index`` was refused at apply (if it was, still known)."""
        return self._recent_refusals.get(index)

    def check_transaction(self, entry: TxControl | TxStore, now_ms: int) -> TopicError | None:
        """The gate's question: why refuse ``entry`` stamped ``now_ms`` (apply's rules)."""
        return self._tx.check(entry, now_ms)

    def transaction(self, txid: str) -> tx_rpc.TransactionInfo:
        """``TS``: what this peer knows of ``txid``."""
        return self._tx.known_status(txid)

    # -- reads -----------------------------------------------------------------------------
    def _state(self, name: str) -> TopicState:
        state = self._topics.get(name)
        if state is None:
            raise TopicError("UnknownTopic", f"topic {name!r} does not exist")
        return state

    def read(self, req: rpc.ReadRequest) -> rpc.ReadResult:
        """``TR``: records of a topic from a record id or an append time (``topic_reads``)."""
        return self._reader.read(
            self._state(req.topic), req, self._applied, self._is_leader, self._last_time
        )

    def describe(self, name: str) -> rpc.TopicInfo:
        """``TD``: a topic's properties, retained range, low-water and log clock."""
        return self._reader.describe(name, self._state(name), self._last_time, self._applied)

    # -- retention and compaction ----------------------------------------------------------
    def compaction_limit(self) -> int:
        """The highest index the log may be compacted to without losing a retained record
        (just below the first record any topic retains; ``last_applied`` when none does)
        or entering a transaction that needs its entries (``TransactionTable``)."""
        lowest = self._schedule.floor.lowest()
        floor = self._applied if lowest is None else min(self._applied, lowest - 1)
        return self._tx.compaction_floor(floor)

    def next_expiry(self) -> int | None:
        """The log-clock time at which the next retained record expires by time or by its
        own TTL (None: nothing will): when the leader's clock passes it, a clock tick makes
        every peer expire it."""
        dues = (
            self._index.next_ttl_deadline(self._last_time),  # kept in the index: a restart
            # knows the deadlines of records applied before it
            self._tx.next_deadline(),  # transaction timeouts need the log clock to move too
            self.groups.table.next_deadline,  # and lease deadlines (#27)
            self._schedule.deadlines.settle(self._last_time),
        )
        return min((due for due in dues if due is not None), default=None)

    def retention_passed(self) -> set[str]:
        """The topics whose time retention removed a record (or may have) since the last
        call, judged at the log clock: the topic totals advance these (``counters``)."""
        self._schedule.deadlines.settle(self._last_time)
        return self._schedule.deadlines.take_passed()

    def _retention_due_of(self, name: str) -> int | None:
        """When ``name``'s oldest retained entry expires by time retention (None: no time
        retention, or nothing retained): the ``RetentionSchedule``'s recompute."""
        state = self._topics.get(name)
        if state is None:
            return None
        return self._reader.retention_due(name, state, self._last_time, self._applied)

    def _first_retained_of(self, name: str) -> int | None:
        """The log index of ``name``'s first retained record (None: none in the log -- gone,
        compacted, or nothing retained): the ``RetentionSchedule``'s recompute."""
        state = self._topics.get(name)
        if state is None or state.properties.compacted:
            return None
        first = self._reader.first_retained(name, state, self._last_time, self._applied)
        return None if first is None else first.index

    def snapshot(self, index: int) -> bytes:
        """Everything the topics decided, exactly as of ``index`` (a build at once)."""
        return built_at_once(self.snapshot_build(index))

    def snapshot_build(self, index: int) -> SnapshotBuild:
        """The snapshot as of ``index``, built a step at a time while apply goes on
        (``raftlog.topics.snapshot_build``); the open transactions and the groups (in
        memory, small) are taken now."""
        open_tx = self._tx.snapshot(index, self._reader.store_data)
        parts = (open_tx, {"groups": self.groups.snapshot_section(self._applied)})
        build = SnapshotBuild(
            self._index, self.kv.store, index, self._base_time, parts, on_done=self._builds.discard
        )
        self._builds.add(build)
        return build

    def _settle(self, name: str) -> None:
        """``name``'s rows are about to go: the snapshots being built take its part now."""
        for build in self._builds:
            build.settle(name)

    def counts(self, req: topic_counts.CountsRequest) -> topic_counts.CountsResult:
        """Records per index bucket (``TC``): every topic, or the named (existing) ones, in
        name order (a part goes on from a name: ``raftlog.topics.counting``)."""
        if req.topics is None:
            names = self._names.sorted(self._topics)  # kept: no sort per part
        else:
            for name in req.topics:
                self._state(name)  # an unknown one is an error, as in a read
            names = sorted(set(req.topics))
        topics = (names, self._topics.get)
        return self._reader.counts(req, topics, self._applied, self._last_time)
