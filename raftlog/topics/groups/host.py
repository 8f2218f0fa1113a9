"""``GroupHost``: the topic state machine's consumer groups (issue #27) -- the table, the
topics it reads, its rows in the topic index and its section of the topic snapshot.

Durability follows the topic index's: changed groups are written into the same unsynced
batch as the applied index (``G<name>`` rows), so after a crash the catch-up re-applies
exactly the group commands the rows miss.

Snapshots: a topic snapshot at index *s* is taken while the machine may have applied up to
*a* >= *s*. Topic metadata is versioned and written exactly as of *s*; groups are not
versioned, so the ``"groups"`` section holds them as of *a* and says so (``applied``). A
peer restoring it re-applies the entries after *s*, skipping the group commands at or
below *a* (already in the state); every later command, and the clock-driven lease expiry
(a no-op for what *a*'s state already reclaimed), applies as on every other peer. The
result is the same group state everywhere.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from typing import Any, Final

import msgpack

from raftlog.topics.groups.codec import decode_group, encode_group
from raftlog.topics.groups.entry import GroupCommand
from raftlog.topics.groups.lag import LagCounts
from raftlog.topics.groups.table import Group, GroupTable
from raftlog.topics.index import EntryRecords, TopicIndex
from raftlog.topics.reads import TopicReader
from raftlog.topics.records import LoggedRecord, RecordId
from raftlog.topics.retention import ttl_expired
from raftlog.topics.state import TopicState

GroupStat = tuple[str, str, int, int, int, int, int, int]
"""``(group, mode, lag, pending, redelivered, dead_lettered, delivered, acked)``: what
``/metrics`` and the status page show per group."""
ROW_PREFIX: Final = b"G"
ROW_END: Final = b"H"
SKIP_KEY: Final = b"mgroups_skip"


class IndexRecords:
    """The ``RecordSource`` of the table over the topic index (record ids only: leasing
    never reads record values, so it costs one index scan)."""

    def __init__(
        self,
        index: TopicIndex,
        reader: TopicReader,
        topics: Callable[[], Mapping[str, TopicState]],
        position: Callable[[], tuple[int, int]],
        sorted_names: Callable[[], Sequence[str]] | None = None,
    ) -> None:
        """``sorted_names``: the topic names in order, the same object until the set
        changes (the machine's ``SortedNames``; default: sorted on every call)."""
        self._index = index
        self._reader = reader
        self._topics = topics
        self._sorted_names = sorted_names or (lambda: sorted(self._topics()))
        self._position = position  # (log clock, applied)
        self.at: int | None = None
        """While a command applies: the index before it (what the index holds, written
        through), so every peer sees the same records whatever its apply batches."""

    def topic_names(self) -> Collection[str]:
        return self._topics().keys()

    def sorted_topic_names(self) -> Sequence[str]:
        return self._sorted_names()

    def start(self, topic: str) -> RecordId:
        state = self._topics().get(topic)
        if state is None:
            return RecordId(0, 0)
        clock, applied = self._position()
        return self._reader.start(topic, state, clock, applied if self.at is None else self.at)

    def end(self, topic: str) -> RecordId:
        applied = self._position()[1] if self.at is None else self.at
        last = next(self._index.entries_before(topic, applied + 1), None)
        if last is None:
            return self.start(topic)
        return max(RecordId(last.index, last.positions[-1] + 1), self.start(topic))

    def read_record(self, topic: str, rid: RecordId, clock_ms: int) -> LoggedRecord | None:
        """The record ``rid`` of ``topic`` (None: gone by retention or deletion)."""
        return next(self.iter_records([(topic, rid)], clock_ms))

    def iter_records(
        self, keys: Iterable[tuple[str, RecordId]], clock_ms: int
    ) -> Iterator[LoggedRecord | None]:
        """The records ``keys`` one by one (None for each one gone), read as they are
        asked for: a caller that stops at a byte budget reads no further (a member may hold
        a thousand leases of 10 MiB records). Leases come in runs of the same publish
        batch, in id order: the reader keeps the entries it decoded last
        (``raftlog.topics.decoded_entries``), so each is decoded once per run."""
        starts: dict[str, RecordId] = {}
        for topic, rid in keys:
            if topic not in starts:
                starts[topic] = self.start(topic)
            entry = None if rid < starts[topic] else self._index.entry(topic, rid.index)
            if entry is None or rid.position not in entry.positions:
                yield None
                continue
            records = self._reader.records_at(rid.index)
            if records is None or rid.position >= len(records):
                yield None
                continue
            item = LoggedRecord(rid, entry.append_time_ms, records[rid.position])
            yield None if ttl_expired(item, clock_ms) else item

    def entries_from(self, topic: str, index: int) -> Iterator[EntryRecords]:
        """The topic's index entries from log index ``index`` on (the lag scans' walk)."""
        return self._index.entries(topic, index)

    def record_ids(self, topic: str, start: RecordId, limit: int) -> list[RecordId]:
        out: list[RecordId] = []
        for entry in self._index.entries(topic, start.index):
            for position in entry.positions:
                rid = RecordId(entry.index, position)
                if rid >= start:
                    out.append(rid)
                    if len(out) >= limit:
                        return out
        return out


class GroupHost:
    """The groups of one topic machine (module docstring)."""

    def __init__(self, index: TopicIndex, source: IndexRecords) -> None:
        self._index = index
        self.source = source
        groups = {}
        for _key, value in index.items(ROW_PREFIX, ROW_END, "groups"):
            group = decode_group(msgpack.unpackb(value, raw=False))
            groups[group.name] = group
        self.table = GroupTable(groups)
        self._lags = LagCounts()
        skip = index.get(SKIP_KEY, "groups skip")
        self._skip_upto = 0 if skip is None else int.from_bytes(skip, "big")

    def apply(
        self, index: int, command: GroupCommand, now: int, write_through: Callable[[int], Any]
    ) -> None:
        """Apply a committed group command (skipped when a restored snapshot holds it);
        ``write_through(index)`` first makes the index hold every record before it."""
        if index <= self._skip_upto:
            return
        if command.op in ("lease", "reset"):
            write_through(index)
        self.source.at = index - 1
        try:
            self.table.apply(index, command, now, self.source)
        finally:
            self.source.at = None

    def tick(self, now: int) -> None:
        """The log clock moved to ``now``: reclaim leases that ran out."""
        if (due := self.table.next_deadline) is not None and now >= due:
            self.table.expire(now)

    def flush(self, batch: Any) -> None:
        """Write the changed groups into the apply's batch."""
        for name in self.table.dirty:
            group = self.table.groups.get(name)
            key = ROW_PREFIX + name.encode()
            if group is None:
                batch.delete(key)
            else:
                batch.put(key, msgpack.packb(encode_group(group), use_bin_type=True))
        self.table.dirty.clear()

    def stats(self, limit: int) -> tuple[GroupStat, ...]:
        """Per-group figures for monitoring, the first ``limit`` groups by name. Lag: records
        not yet delivered (queue: after the cursor, plus those waiting for redelivery) or
        not yet committed (stream: after the committed position), over the group's topics."""
        table = self.table
        shown = [
            (group, table.resolved(group, self.source))
            for group in (table.groups[n] for n in table.names.sorted(table.groups)[:limit])
        ]
        wanted = [(g.name, t, self._position(g, t)) for g, topics in shown for t in topics]
        lags = self._lags.refresh(wanted, self.source)  # bounded per view (``lag``)
        out = []
        for group, topics in shown:
            lag = len(group.waiting) + sum(lags[(group.name, t)] for t in topics)
            s = group.stats
            out.append((group.name, group.mode, lag, len(group.leases), s.redelivered,
                        s.dead_lettered, s.delivered, s.acked))
        return tuple(out)

    @staticmethod
    def _position(group: Group, topic: str) -> RecordId:
        """Where the group's lag on ``topic`` counts from (queue: its cursor; stream: its
        committed position)."""
        if group.mode == "queue":
            return group.cursors.get(topic, RecordId(0, 0))
        position = group.positions.get(topic)
        return RecordId(0, 0) if position is None else position.next_record

    def snapshot_section(self, applied: int) -> dict[str, Any] | None:
        """The ``"groups"`` section (None: no groups -- older peers read the snapshot)."""
        if not self.table.groups:
            return None
        groups = [encode_group(g) for g in self.table.groups.values()]
        return {"applied": applied, "groups": groups}

    def restore(self, batch: Any, section: object) -> None:
        """Replace every group by a snapshot's section (absent: none)."""
        groups = {}
        skip = 0
        if isinstance(section, dict):
            skip = int(section.get("applied", 0))
            for body in section.get("groups", []):
                group = decode_group(body)
                groups[group.name] = group
        self.table.reset_to(groups)
        self.table.dirty = set(groups)
        self._skip_upto = skip
        batch.put(SKIP_KEY, skip.to_bytes(8, "big"))
        self.flush(batch)
