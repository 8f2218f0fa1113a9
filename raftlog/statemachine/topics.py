"""``TopicStateMachine``: named topics over the log, indexed in ``<data_dir>/topics`` (#7).

Every peer applies the same committed entries in the same order, so every peer builds the
same index and serves records in the same order. Rules applied to each STATE entry carrying
a topic entry (``raftlog.records``), deterministic because they depend on the log alone:

* record batch: refused as a whole (not indexed) if a record names a topic that does not
  exist -- unless the leader set AUTO_CREATE, which creates it with default properties --
  or exceeds its topic's ``max_bytes``. The leader checks the same rules before proposing
  (``raftlog.server.topics_hook``), so a refusal here only happens when an admin command
  committed in between, or when the entry came through a leader that does not check.
* effective append time = max(leader's stamp, effective time of the previous record
  entry): non-decreasing in log order even across leaders with skewed clocks, which is
  what makes "records appended at or after T" a single seek and exact.
* admin: create of an existing topic, update/delete of a missing one: no-ops. Delete
  drops the topic's records; a re-created topic starts empty.
* malformed topic entries are skipped (logged): a peer never stops on application data.

Durability: the index and ``last_applied`` are written in one unsynced batch per ``apply``.
After a crash (or with the database deleted) ``catch_up`` re-applies from the log whatever
the index is missing, from its own ``last_applied`` -- restoring the snapshot first if the
log was compacted past it. Snapshots hold topic metadata (as of the snapshot index) and the
effective time there; index entries of compacted entries are dropped.

Reads (``TR``/``TD``/``TL``, ``raftlog.rpc.topics``) are served from the applied state on
any peer, never beyond ``last_applied``; expired records (append time + ``retention_ms``
at or before now, by this peer's clock) and compacted ones are never returned.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Final

import msgpack

from raftlog.entry import ENTRY_HEADER_SIZE, EntryType
from raftlog.records import (
    MAGIC,
    RecordBatch,
    RecordFormatError,
    TopicCommand,
    TopicEntry,
    TopicError,
    TopicProperties,
    decode_entry,
)
from raftlog.rpc import topic_counts
from raftlog.rpc import topics as rpc
from raftlog.statemachine.topic_index import TopicIndex, TopicState
from raftlog.statemachine.topic_reads import EntrySource, TopicReader, wall_ms
from raftlog.storage.base import SnapshotStore

NAME: Final = "topics"
TOPICS_DIR: Final = "topics"
"""The machine's own RocksDB under the peer's data directory."""
GC_INTERVAL: Final = 1.0
MAX_RECENT_REFUSALS: Final = 10_000
"""Refused batch indexes remembered for answering their publishers (``refusal_at``)."""
CATCH_UP_BYTES: Final = 8 * 1024 * 1024
SNAPSHOT_VERSION: Final = 1


def check_entry(
    entry: TopicEntry, topics: Mapping[str, TopicState], auto_create: bool
) -> TopicError | None:
    """Why ``entry`` would be refused given ``topics``, or None (used at apply and by the
    leader before proposing). Admin no-ops are errors here, for the proposer only."""
    if isinstance(entry, TopicCommand):
        exists = entry.topic in topics
        if entry.op == "create" and exists:
            return TopicError("TopicExists", f"topic {entry.topic!r} already exists")
        if entry.op != "create" and not exists:
            return TopicError("UnknownTopic", f"topic {entry.topic!r} does not exist")
        return None
    for position, record in enumerate(entry.records):
        state = topics.get(record.topic)
        if state is None:
            if not auto_create:
                return TopicError(
                    "UnknownTopic",
                    f"record {position}: topic {record.topic!r} does not exist "
                    "(create it first, or enable topic_auto_create)",
                )
            continue
        limit = state.properties.max_bytes
        if limit is not None and record.size > limit:
            return TopicError(
                "RecordTooLarge",
                f"record {position}: {record.size} bytes exceed max_bytes={limit} "
                f"of topic {record.topic!r}",
            )
    return None


class TopicStateMachine:
    """Topics over the replicated log: applies topic commands and record batches into a topic
    index, and answers topic reads (``TR``, ``TD``, ``TL``) from it."""

    name = NAME

    def __init__(
        self,
        path: Path,
        entries: EntrySource,
        *,
        clock: Callable[[], int] = wall_ms,
        log: Any = None,
    ) -> None:
        self._index = TopicIndex(path)
        self._entries = entries
        self._clock = clock
        self._log = log
        self._reader = TopicReader(self._index, entries, clock)
        self._is_leader = False
        self._applied, self._last_time, self._base_time = self._index.load_position()
        self._topics = self._index.topics_as_of()
        self._next_gc = 0.0
        self._gc_floor = 0
        self._retention_floor: dict[str, int] = {}
        self.refused_entries = 0
        self._recent_refusals: OrderedDict[int, TopicError] = OrderedDict()
        self.malformed_entries = 0

    # -- state -----------------------------------------------------------------------------
    @property
    def last_applied(self) -> int:
        """Index of the last entry applied to the topic index."""
        return self._applied

    @property
    def last_time(self) -> int:
        """Effective append time of the last applied record entry (0 when none)."""
        return self._last_time

    @property
    def topics(self) -> Mapping[str, TopicState]:
        """The topics as of the applied index (the leader's gate checks publishes against it)."""
        return self._topics

    def _note(self, event: str, **fields: object) -> None:
        if self._log is not None:
            self._log.warning(event, **fields)

    # -- StateMachine ----------------------------------------------------------------------
    def refusal_at(self, index: int) -> TopicError | None:
        """Why the record batch at ``index`` was refused when applied (a topic deleted
        between the leader's check and the apply), if it was and it is still remembered."""
        return self._recent_refusals.get(index)

    def apply(self, first_index: int, entries: Sequence[bytes], term: int) -> None:
        """Apply committed entries: topic commands change topics, record batches are indexed (or
        refused, deterministically); a replayed prefix is skipped."""
        last = first_index + len(entries) - 1
        if not entries or last <= self._applied:
            return  # a replay of what this machine already applied
        batch = self._index.batch()
        state = EntryType.STATE
        for offset in range(max(0, self._applied + 1 - first_index), len(entries)):
            raw = entries[offset]
            if raw[12] == state and raw.startswith(MAGIC, ENTRY_HEADER_SIZE):
                self._apply_data(batch, first_index + offset, raw[ENTRY_HEADER_SIZE:])
        self._index.put_position(batch, last, self._last_time)
        self._index.write(batch, "topic index")
        self._applied = last

    def _apply_data(self, batch: Any, index: int, data: bytes) -> None:
        try:
            entry = decode_entry(data)
        except RecordFormatError as exc:
            self.malformed_entries += 1
            self._note("topic_entry_malformed", index=index, reason=str(exc))
            return
        if entry is None:
            return
        error = check_entry(
            entry, self._topics, isinstance(entry, RecordBatch) and entry.auto_create
        )
        if isinstance(entry, TopicCommand):
            if error is None:
                self._apply_command(batch, index, entry)
            return
        if error is not None:
            self.refused_entries += 1
            self._recent_refusals[index] = error
            if len(self._recent_refusals) > MAX_RECENT_REFUSALS:
                self._recent_refusals.popitem(last=False)
            self._note("topic_batch_refused", index=index, reason=str(error))
            return
        for record in entry.records:
            if record.topic not in self._topics:
                self._set(batch, record.topic, index, TopicState(TopicProperties(), index))
        self._last_time = max(self._last_time, entry.append_time_ms)
        pairs = [(r.topic, position) for position, r in enumerate(entry.records)]
        self._index.put_entry(batch, index, self._last_time, pairs)

    def _apply_command(self, batch: Any, index: int, command: TopicCommand) -> None:
        name = command.topic
        if command.op == "create":
            props = TopicProperties().updated(command.properties)
            self._set(batch, name, index, TopicState(props, index))
        elif command.op == "update":
            old = self._topics[name]
            self._set(
                batch,
                name,
                index,
                TopicState(old.properties.updated(command.properties), old.created_index),
            )
        else:
            self._set(batch, name, index, None)
            self._index.delete_topic_records(batch, name)
            self._retention_floor.pop(name, None)

    def _set(self, batch: Any, name: str, index: int, state: TopicState | None) -> None:
        if state is None:
            self._topics.pop(name, None)
        else:
            self._topics[name] = state
        self._index.put_version(batch, name, index, state)

    def set_leader(self, is_leader: bool, term: int) -> None:
        """Remember the role: reads tell clients whether they came from the leader."""
        self._is_leader = is_leader

    def snapshot(self, index: int) -> bytes:
        """Topic metadata and the effective time, both exactly as of ``index``."""
        topics = self._index.topics_as_of(index)
        at = self._index.time_at(index)
        body = {
            "v": SNAPSHOT_VERSION,
            "time": self._base_time if at is None else at[1],
            "topics": {
                name: [s.properties.retention_ms, s.properties.max_bytes, s.created_index]
                for name, s in topics.items()
            },
        }
        packed: bytes = msgpack.packb(body)
        return packed

    def restore(self, index: int, term: int, data: bytes) -> None:
        """Replace everything by the snapshot's metadata; the records below ``index`` are
        gone from the log, so the record and time indexes restart empty."""
        topics, base_time = _parse_snapshot(data)
        batch = self._index.batch()
        self._index.clear(batch)
        for name, state in topics.items():
            self._index.put_version(batch, name, index, state)
        self._index.put_base_time(batch, base_time)
        self._index.put_position(batch, index, base_time)
        self._index.write(batch, "topic snapshot restore")
        self._applied, self._last_time, self._base_time = index, base_time, base_time
        self._topics = topics
        self._retention_floor.clear()
        self._gc_floor = index + 1

    def handle_request(self, msg_type: bytes, args: Sequence[bytes]) -> list[bytes] | None:
        """The topic read RPCs (``TR``, ``TD``, ``TL``); bad requests are answered with a typed
        error, never dropped."""
        try:
            if msg_type == rpc.TYPE_READ:
                return rpc.encode_read_response(self.read(rpc.decode_read_request(args)))
            if msg_type == rpc.TYPE_DESCRIBE:
                return rpc.encode_describe_response(
                    self.describe(rpc.decode_describe_request(args))
                )
            if msg_type == rpc.TYPE_LIST:
                return rpc.encode_list_response(list(self._topics))
            if msg_type == topic_counts.TYPE_COUNTS:
                return topic_counts.encode_counts_response(
                    self.counts(topic_counts.decode_counts_request(args))
                )
        except TopicError as exc:
            return rpc.encode_error(exc)
        return None

    def on_timer(self, now: float) -> float:
        """Collect records past their retention now and then; returns when to run next."""
        if now >= self._next_gc:
            self._next_gc = now + GC_INTERVAL
            self._collect()
        return self._next_gc

    def close(self) -> None:
        """Close the topic index."""
        self._index.close()

    # -- start-up --------------------------------------------------------------------------
    def catch_up(self, snapshots: SnapshotStore, upto: int) -> None:
        """Bring the index to ``upto`` (the peer's persisted last_applied) from its own
        position: restore the snapshot if the log was compacted past it, then re-apply."""
        store = self._entries
        if self._applied < store.snapshot_index:
            meta = snapshots.meta()
            data = snapshots.read(0, meta.size) if meta is not None else b""
            index = meta.index if meta is not None else store.snapshot_index
            term = meta.term if meta is not None else store.snapshot_term
            self.restore(index, term, snapshot_part(data, self.name))
        while self._applied < upto:
            lo = self._applied + 1
            self.apply(lo, store.raw_entries(lo, upto + 1, CATCH_UP_BYTES), 0)

    # -- reads -----------------------------------------------------------------------------
    def _state(self, name: str) -> TopicState:
        state = self._topics.get(name)
        if state is None:
            raise TopicError("UnknownTopic", f"topic {name!r} does not exist")
        return state

    def read(self, req: rpc.ReadRequest) -> rpc.ReadResult:
        """``TR``: records of a topic from a record id or an append time."""
        return self._reader.read(self._state(req.topic), req, self._applied, self._is_leader)

    def describe(self, name: str) -> rpc.TopicInfo:
        """``TD``: a topic's properties and retained range."""
        return self._reader.describe(name, self._state(name))

    def counts(self, req: topic_counts.CountsRequest) -> topic_counts.CountsResult:
        """Records per index bucket (``TC``): every topic, or the named ones (each must
        exist: ``UnknownTopic`` otherwise)."""
        names = list(self._topics) if req.topics is None else req.topics
        states = {name: self._state(name) for name in names}
        return self._reader.counts(req, states, self._applied)

    # -- housekeeping ----------------------------------------------------------------------
    def _collect(self) -> None:
        """Drop index keys nobody can read any more: entries compacted out of the log and
        records past their topic's retention (reads filter them anyway; this bounds space)."""
        batch = self._index.batch()
        dirty = False
        floor = self._entries.first_index
        if floor > self._gc_floor:
            self._index.drop_below(batch, floor, list(self._topics))
            self._gc_floor = floor
            dirty = True
        now = self._clock()
        for name, state in self._topics.items():
            if state.properties.retention_ms is None:
                continue
            first = self._index.first_index_at(max(0, now - state.properties.retention_ms + 1))
            expired_below = self._applied + 1 if first is None else first
            if expired_below > self._retention_floor.get(name, 0):
                self._index.delete_topic_records(batch, name, expired_below)
                self._retention_floor[name] = expired_below
                dirty = True
        if dirty:
            self._index.write(batch, "topic index cleanup")


def _parse_snapshot(data: bytes) -> tuple[dict[str, TopicState], int]:
    """Empty data (a snapshot from before topics existed) is an empty state; anything else
    must be our format: restoring garbage silently would lose topics."""
    if not data:
        return {}, 0
    body = msgpack.unpackb(data, raw=False)
    if not isinstance(body, dict) or body.get("v") != SNAPSHOT_VERSION:
        raise ValueError("unsupported topic snapshot format")
    topics = {
        name: TopicState(TopicProperties(retention, max_bytes), created)
        for name, (retention, max_bytes, created) in body["topics"].items()
    }
    return topics, int(body["time"])


def snapshot_part(data: bytes, name: str) -> bytes:
    """This machine's part of a ``CompositeStateMachine`` snapshot (b"" when absent)."""
    try:
        value = msgpack.unpackb(data, raw=False) if data else {}
    except (ValueError, msgpack.UnpackException):
        return b""
    part = value.get(name) if isinstance(value, dict) else None
    return part if isinstance(part, bytes) else b""


def open_topic_machine(
    path: Path,
    entries: EntrySource,
    snapshots: SnapshotStore,
    applied: int,
    *,
    log: Any = None,
) -> TopicStateMachine:
    """Open the machine and catch it up to ``applied``; closed again if that fails."""
    machine = TopicStateMachine(path, entries, log=log)
    try:
        if machine.last_applied < applied and log is not None:
            log.info("topic_index_catch_up", start=machine.last_applied, upto=applied)
        machine.catch_up(snapshots, applied)
    except BaseException:
        machine.close()
        raise
    return machine
