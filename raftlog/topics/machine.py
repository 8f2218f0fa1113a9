"""``TopicStateMachine``: named topics over the log, indexed in ``<data_dir>/topics`` (#7, #11).

Every peer applies the same committed entries in the same order, so every peer builds the
same index and serves records in the same order. Rules applied to each STATE entry carrying
a topic entry (``raftlog.topics.records``), deterministic because they depend on the log alone:

* record batch: refused whole (not indexed) if a record names a missing topic (unless the
  leader set AUTO_CREATE) or exceeds its ``max_record_bytes``, as the leader's gate checked
  (``raftlog.topics.gate``), or if its expectations fail (conditional publish, below).
* the log clock = max(leader's stamp, previous log clock) over every stamped topic entry:
  non-decreasing in log order across leaders with skewed clocks, so "records appended at
  or after T" is one seek, and retention runs identically on every peer (``topic_reads``).
* admin: create of an existing topic, update/delete of a missing one: no-ops. Delete
  drops the topic's records; a re-created topic starts empty. An update moves the topic's
  low-water mark up to what retention removed so far, so a raised limit resurrects nothing.
* malformed topic entries are skipped (logged): a peer never stops on application data.

Records (#11) are read from the log, never compacted past the first record a topic retains
(``compaction_limit``): a snapshot holds metadata only, but for compacted topics' live records
(#29, ``compacted``). The index and ``last_applied`` are written in one unsynced batch per
``apply``; after a crash ``catch_up`` re-applies what the index misses. Elsewhere:
conditional publishes (#29) ``kv_state``; transactions (#18) ``tx``; groups (#27) ``groups``.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final

from raftlog.entry import ENTRY_HEADER_SIZE, EntryType, decode_time_checkpoint
from raftlog.errors import TopicError, TransactionError
from raftlog.storage.base import SnapshotStore
from raftlog.topics.commit import CommitRecords, plan_commit
from raftlog.topics.counters import TopicCounters
from raftlog.topics.groups.entry import GroupCommand
from raftlog.topics.groups.host import GroupHost, IndexRecords
from raftlog.topics.index import TopicIndex, group_by_topic
from raftlog.topics.index_cleanup import IndexCleanup
from raftlog.topics.kv_state import KeyValueState
from raftlog.topics.machine_views import TopicMachineViews
from raftlog.topics.names import SortedNames
from raftlog.topics.reads import TopicReader
from raftlog.topics.record_scan import BatchSummary, batch_fits, summarize_batch
from raftlog.topics.records import (
    MAGIC,
    ClockTick,
    RecordBatch,
    RecordFormatError,
    TopicCommand,
    TopicProperties,
)
from raftlog.topics.records_tx import TxControl, TxStore, decode_any_entry
from raftlog.topics.replay import catch_up
from raftlog.topics.requests import answer_request
from raftlog.topics.retention import EntrySource
from raftlog.topics.retention_schedule import RetentionSchedule
from raftlog.topics.rules import check_entry
from raftlog.topics.snapshot import parse_snapshot, snapshot_part
from raftlog.topics.snapshot_build import SnapshotBuild
from raftlog.topics.state import TopicState
from raftlog.topics.tx import TransactionTable
from raftlog.topics.tx_rows import Finished

NAME: Final = "topics"
TOPICS_DIR: Final = "topics"
"""The machine's own RocksDB under the peer's data directory."""
GC_INTERVAL: Final = 1.0
MAX_RECENT_REFUSALS: Final = 10_000
"""Refused batch indexes remembered for answering their publishers (``refusal_at``)."""
__all__ = ["TopicStateMachine", "check_entry", "snapshot_part"]


class TopicStateMachine(TopicMachineViews):
    """Topics over the replicated log: applies topic commands and record batches into a topic
    index, and answers topic reads (``TR``, ``TD``, ``TL``) from it."""

    name = NAME

    def __init__(self, path: Path, entries: EntrySource, *, log: Any = None) -> None:
        self._index = TopicIndex(path)
        self._tx = TransactionTable(self._index)
        self.kv = KeyValueState(self._index)  # last ids, compacted topics' keys (#29)
        self._entries = entries
        self._log = log
        self._reader = TopicReader(self._index, entries, self.kv.store)
        self.counters = TopicCounters(self._index, self._reader, entries)
        """Per-topic totals for monitoring (fed here; ``topic_counters``)."""
        self._is_leader = False
        self._applied, self._last_time, self._base_time = self._index.load_position()
        self._topics = self._index.topics_as_of()
        self._published: dict[str, int] = {}
        self._batch = self._index.batch()
        """The write batch of the ``apply`` call in progress."""
        self._schedule = RetentionSchedule(self._retention_due_of, self._first_retained_of)
        """When time retention next moves, and the lowest retained index (no topic walks)."""
        self._schedule.reset(self._topics)
        self._names = SortedNames()
        self._builds: set[SnapshotBuild] = set()
        """The names in order, kept until the set changes (``TL``: ``raftlog.topics.names``)."""
        self._next_gc = 0.0
        drop = lambda name: self.counters.compacted_past(self, name)  # noqa: E731
        self._cleanup = IndexCleanup(self._index, self.kv.store, self._tx, drop)
        self.refused_entries = 0
        self._recent_refusals: OrderedDict[int, TopicError] = OrderedDict()
        self.malformed_entries = 0
        position = lambda: (self._last_time, self._applied)  # noqa: E731
        names = lambda: self._names.sorted(self._topics)  # noqa: E731
        records = IndexRecords(self._index, self._reader, lambda: self._topics, position, names)
        self.groups = GroupHost(self._index, records)  # consumer groups (#27)

    def _note(self, event: str, **fields: object) -> None:
        if self._log is not None:
            self._log.warning(event, **fields)

    # -- StateMachine ----------------------------------------------------------------------
    def apply(self, first_index: int, entries: Sequence[bytes], term: int) -> None:
        """Apply committed entries: topic commands change topics, record batches are indexed (or
        refused, deterministically), ticks and time checkpoints move the log clock; a replayed
        prefix is skipped."""
        last = first_index + len(entries) - 1
        if not entries or last <= self._applied:
            return  # a replay of what this machine already applied
        self._batch = self._index.batch()
        self.kv.begin()
        state, checkpoint = EntryType.STATE, EntryType.CHECKPOINT
        for offset in range(max(0, self._applied + 1 - first_index), len(entries)):
            raw = entries[offset]
            if raw[12] == state and raw.startswith(MAGIC, ENTRY_HEADER_SIZE):
                self._apply_data(self._batch, first_index + offset, raw[ENTRY_HEADER_SIZE:])
            elif raw[12] == checkpoint:  # a time checkpoint moves the log clock (issue #24)
                stamp = decode_time_checkpoint(raw[ENTRY_HEADER_SIZE:])
                if stamp is not None:
                    self._advance_clock(self._batch, first_index + offset, stamp)
        self.groups.flush(self._batch)
        self._index.put_position(self._batch, last, self._last_time)
        self._index.write(self._batch, "topic index")
        self._applied = last

    def _apply_data(self, batch: Any, index: int, data: bytes) -> None:
        summary = summarize_batch(data)
        if (
            summary is not None
            and not summary.ttls
            and batch_fits(summary, self._topics, summary.auto_create)
        ):
            self._apply_summary(batch, index, summary)
            return
        # Anything else (commands, ticks, transactions, refusals, malformed data, records with
        # their own TTL: the monitoring counters track those one by one) is decoded in full,
        # so every peer reaches the same decision with the same message.
        try:
            entry = decode_any_entry(data)
        except RecordFormatError as exc:
            self.malformed_entries += 1
            self._note("topic_entry_malformed", index=index, reason=str(exc))
            return
        if entry is None:
            return
        self._advance_clock(batch, index, entry.append_time_ms)
        if isinstance(entry, ClockTick):
            return
        if isinstance(entry, GroupCommand):  # it may read the index: write it through
            self.groups.apply(index, entry, self._last_time, self._write_through)
            return
        if isinstance(entry, TxControl | TxStore):
            if isinstance(entry, TxStore):  # its commit reads it again: keep it decoded
                self._reader.decoded.offer(index, len(data), entry)
            self._apply_tx(batch, index, entry)
            return
        error = check_entry(
            entry, self._topics, isinstance(entry, RecordBatch) and entry.auto_create
        )
        if isinstance(entry, TopicCommand):
            if error is None:
                self._apply_command(batch, index, entry)
            return
        if error is None and entry.expect:
            error = self.kv.refusal(entry, self._topics, self._last_time)
        if error is not None:
            self._refuse(index, error)
            return
        by_topic, ttls = group_by_topic(entry.records)
        for name in by_topic:
            self._note_topic(batch, name, index)
        for due in {self._last_time + ttl_ms for _, _, ttl_ms, _ in ttls}:
            self._index.put_ttl_deadline(batch, due, index)
        for name, position, ttl_ms, size in ttls:
            self.counters.ttl(name, index, position, self._last_time + ttl_ms, size)
        self._index_entry(batch, index, by_topic, entry.records)

    def _advance_clock(self, batch: Any, index: int, stamp_ms: int) -> None:
        """Entry ``index`` is stamped ``stamp_ms``: the log clock moves, and every open
        transaction it passed times out before the entry applies (both apply paths)."""
        self._last_time = max(self._last_time, stamp_ms)
        self.groups.tick(self._last_time)
        if self._tx.open:
            self._tx.expire(batch, index, self._last_time)

    def _index_entry(self, batch: Any, index: int, by_topic: Any, records: Any = None) -> None:
        """Index and count entry ``index``'s records (``records``: None on the fast path)."""
        self._index.put_entry(batch, index, self._last_time, by_topic, self._published)
        self.kv.indexed(batch, index, by_topic, self._topics, self._last_time, records)
        self.counters.indexed(by_topic)
        self._schedule.applied(index, by_topic, self._topics, self._last_time)

    def _refuse(self, index: int, error: TopicError) -> None:
        self.refused_entries += 1
        self._recent_refusals[index] = error
        if len(self._recent_refusals) > MAX_RECENT_REFUSALS:
            self._recent_refusals.popitem(last=False)
        self._note("topic_batch_refused", index=index, reason=str(error))

    # -- transactions (issue #18; the rules: topic_tx) -------------------------------------
    def _apply_tx(self, batch: Any, index: int, entry: TxControl | TxStore) -> None:
        """Apply a transaction entry (the rules: ``topic_tx``), or refuse it."""
        error = self._tx.check(entry, self._last_time)
        if error is None and isinstance(entry, TxStore):
            error = check_entry(entry, self._topics, entry.auto_create)
        if error is not None:
            self._refuse(index, error)
            return
        if isinstance(entry, TxStore):
            for record in entry.records:
                if record.topic not in self._topics:  # AUTO_CREATE (checked above)
                    self._note_topic(batch, record.topic, index)
            self._tx.store(batch, index, entry)
        elif entry.op == "begin":
            self._tx.begin(batch, index, entry, self._last_time)
        elif entry.op == "rollback":
            self._tx.end(batch, entry.txid, Finished("aborted", index))
        else:
            self._commit(batch, index, entry.txid)

    def _commit(self, batch: Any, index: int, txid: str) -> None:
        """Index the transaction's records as one entry at ``index``, or abort it whole."""
        tx = self._tx.open[txid]
        plan = plan_commit(tx.stores, self._reader.store_at, self._topics)
        if isinstance(plan, str):
            self._tx.end(batch, txid, Finished("aborted", index))
            problem = f"transaction {txid!r} aborted: {plan}"
            self._refuse(index, TransactionError("TransactionAborted", problem, txid))
            return
        if plan.by_topic:
            for name in plan.by_topic:
                self._note_topic(batch, name, index)
            for due in {self._last_time + ttl for ttl in plan.ttls}:
                self._index.put_ttl_deadline(batch, due, index)
            records = CommitRecords(tx.stores, self._reader.store_at)  # read lazily
            self._index_entry(batch, index, plan.by_topic, records)
            self._index.put_commit_stores(batch, index, tx.stores)
        self._tx.end(batch, txid, Finished("committed", index, index))

    def _apply_summary(self, batch: Any, index: int, summary: BatchSummary) -> None:
        """The hot path of every publish on every peer: no Record per record (``record_scan``)."""
        self._advance_clock(batch, index, summary.append_time_ms)
        by_topic: dict[str, tuple[list[int], int]] = {}
        for name, share in summary.topics.items():
            self._note_topic(batch, name, index)
            by_topic[name] = (share.positions, share.size)
        self._index_entry(batch, index, by_topic)

    def _note_topic(self, batch: Any, name: str, index: int) -> None:
        """A record batch names ``name``: create it if the leader's AUTO_CREATE allowed a
        missing topic (checked before), and load its running byte count once."""
        if name not in self._topics:
            self._set(batch, name, index, TopicState(TopicProperties(), index))
            self._published[name] = 0
        elif name not in self._published:
            self._published[name] = self._index.published_bytes(name)

    def _apply_command(self, batch: Any, index: int, command: TopicCommand) -> None:
        name = command.topic
        if command.op == "create":
            props = TopicProperties().updated(command.properties)
            self._index.delete_topic_records(batch, name)
            self._published[name] = 0
            self._set(batch, name, index, TopicState(props, index))
        elif command.op == "update":
            old = self._topics[name]
            # What retention removed so far stays removed, whatever the new limits say.
            batch = self._write_through(index)
            start = self._reader.start(name, old, self._last_time, index - 1)
            low = self._reader.low_water(name, old, start)
            self._set(
                batch,
                name,
                index,
                TopicState(old.properties.updated(command.properties), old.created_index, low),
            )
        else:
            self._set(batch, name, index, None)
            self._index.delete_topic_records(batch, name)
            self._published.pop(name, None)

    def _write_through(self, index: int) -> Any:
        """Write what this apply indexed before ``index`` (readers see the database only),
        with the matching position; returns the batch the rest of the call writes into."""
        self.groups.flush(self._batch)
        self._index.put_position(self._batch, index - 1, self._last_time)
        self._index.write(self._batch, "topic index")
        self._batch = self._index.batch()
        return self._batch

    def _set(self, batch: Any, name: str, index: int, state: TopicState | None) -> None:
        if state is None:
            self._topics.pop(name, None)
        else:
            self._topics[name] = state
        self._index.put_version(batch, name, index, state)
        self.counters.topic_set(name, index, state)
        if state is None or state.created_index == index:
            self._names.changed()
        self._schedule.changed(name, state, self._last_time)
        if state is None or state.created_index == index:  # a new incarnation: no keys
            self._settle(name)  # before this apply's batch drops its rows (here, create, delete)
            self.kv.dropped(batch, name)

    def set_leader(self, is_leader: bool, term: int) -> None:
        """Remember the role: reads tell clients whether they came from the leader."""
        self._is_leader = self.kv.is_leader = is_leader

    def restore(self, index: int, term: int, data: bytes) -> None:
        """Replace everything by the snapshot's metadata; the records below ``index`` are
        gone from the log (none of them retained), so the record indexes restart empty."""
        topics, base_time, open_transactions, sections = parse_snapshot(data)
        for build in list(self._builds):
            build.cancel()  # what it reads is replaced
        batch = self._index.batch()
        self._index.clear(batch)
        self.kv.reset()
        for due, at in self.kv.store.restore(batch, sections["compacted"]):
            self._index.put_ttl_deadline(batch, due, at)
        self.groups.restore(batch, sections.get("groups"))
        for name, state in topics.items():
            self._index.put_version(batch, name, index, state)
        TransactionTable.restore(batch, open_transactions)
        self._index.put_base_time(batch, base_time)
        self._index.put_position(batch, index, base_time)
        self._index.write(batch, "topic snapshot restore")
        self._reader.decoded.forget()
        self._applied, self._last_time, self._base_time = index, base_time, base_time
        self._topics = topics
        self._schedule.reset(topics)
        self._names.changed()
        self._tx.load()
        self._published.clear()
        self._cleanup.reset(index + 1)
        self.counters.seed_all(self)

    def handle_request(self, msg_type: bytes, args: Sequence[bytes]) -> list[bytes] | None:
        """The topic read RPCs (``TR``, ``TD``, ``TL``, ``TC``, ``TS``, ...): ``requests``."""
        return answer_request(self, msg_type, args)

    def on_timer(self, now: float) -> float:
        """Drop index keys of compacted entries now and then; returns when to run next."""
        if now >= self._next_gc:
            self._next_gc = now + GC_INTERVAL
            # retention counted before the clean-up drops the keys it walks
            self.counters.advance_all(self)
            self.kv.refresh_stats(self._topics, self._last_time, now)
            self._collect()
            self._schedule.floor.lowest()  # a burst of new topics: looked at a slice a pass
            first_due = self._index.next_ttl_deadline(-1)
            if first_due is not None and first_due <= self._last_time:  # passed: forget them
                batch = self._index.batch()
                self._index.drop_ttl_deadlines(batch, self._last_time)
                self._index.write(batch, "passed TTL deadlines")
        return self._next_gc

    def close(self) -> None:
        """Close the topic index."""
        self._index.close()

    # -- start-up --------------------------------------------------------------------------
    def catch_up(self, snapshots: SnapshotStore, upto: int) -> None:
        """Bring the index to ``upto`` from its own position (``raftlog.topics.replay``)."""
        catch_up(self, self._entries, snapshots, upto)

    # -- housekeeping ----------------------------------------------------------------------
    def _collect(self) -> None:
        """Drop index keys of entries compacted out of the log (bounds the index's space), a
        slice a pass (``raftlog.topics.index_cleanup``)."""
        names = self._names.sorted(self._topics)
        self._cleanup.run(self._entries.first_index, self._topics, names, self._base_time)

