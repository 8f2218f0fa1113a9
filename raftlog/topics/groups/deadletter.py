"""The leader moves dead records of queue groups into their dead-letter topics (issue #27).

A record delivered ``max_deliveries`` times without an ack is *dead* in the group state
(``raftlog.topics.groups.table``), on every peer alike. The state machine cannot append
entries, so the leader does, on its timer: for each group with dead records (a batch of at
most ``BATCH`` at a time) it proposes

1. a record batch to the group's dead-letter topic (created first if missing): each record
   the original's key, value and headers plus ``raftlog-dlq-group``, ``-topic``, ``-id``
   (``index:position``), ``-attempts`` and ``-reason``;
2. the group command ``dead`` naming those records, which removes them from the group.

Both carry request ids derived from the replicated state (the group, the records, the log
time they died), so a new leader that finds the same dead records after a crash proposes the
same ids: the log's request-id deduplication keeps every dead record in the dead-letter
topic exactly once. Nothing is proposed again for a group until the last ``dead`` command
is applied.

Copies that would not fit one entry (``max_log_entry_data_size``): a record may be as large
as the limit allows *its own* entry, and its copy adds the headers above (and a nack's
reason, up to an entry of its own). Such a publish was appended unchecked -- every peer's
storage refused it and the peer exited, the next leader proposed it again: one consumer's
nack of one near-limit record took the whole cluster down. Now the publish holds fewer
records until it fits, and a single record that still does not is copied *slimmed*: first
without its value, then also without its key and its own headers and with the reason cut
to ``REASON_KEPT`` bytes; ``raftlog-dlq-omitted`` says what was left out (the original is
still at ``-topic``/``-id`` while its topic retains it). A dead-letter topic's own
``max_record_bytes`` is met the same way (a copy is larger than its original). The slimming
depends only on the state and the limits, so a new leader with the same entry limit
proposes the same request ids. A limit no copy meets (a dead-letter topic whose
``max_record_bytes`` is below the copy's own headers) leaves the group's dead records where
they are (``describe_group`` shows them) and is tried again each timer pass.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping
from typing import Final, Protocol, TypeAlias

from raftlog.ids import make_request_id
from raftlog.topics.groups.entry import GroupCommand, encode_group_command
from raftlog.topics.groups.host import GroupHost
from raftlog.topics.reads import READ_BUDGET
from raftlog.topics.records import (
    LoggedRecord,
    Record,
    RecordId,
    TopicCommand,
    encode_command,
    encode_records,
    records_within,
)
from raftlog.topics.state import TopicState

BATCH: Final = 100
BATCH_BYTES: Final = READ_BUDGET
"""Record bytes moved in one dead-letter publish at most (a larger record alone). Why: a
hundred dead records of up to 10 MiB each were read, copied and proposed as one entry --
past the entry size limit."""
HEADER_PREFIX: Final = "raftlog-dlq-"
REASON_KEPT: Final = 256
"""Bytes of a nack's reason kept in a copy slimmed to fit one entry (module docstring)."""
OMITTED: Final = ("", "value", "value,key,headers,reason")
"""What each slimming level leaves out of a copy (``raftlog-dlq-omitted``; level 0: none)."""


class DeadLetterSource(Protocol):
    """What the driver reads of the topic state machine."""

    @property
    def groups(self) -> GroupHost: ...

    @property
    def last_applied(self) -> int: ...

    @property
    def last_time(self) -> int: ...

    @property
    def topics(self) -> Mapping[str, TopicState]: ...


def _request_id(kind: bytes, group: str, ids: list[list[object]], died_ms: int) -> bytes:
    digest = hashlib.sha256(kind + group.encode() + repr(ids).encode()).digest()
    return make_request_id(died_ms // 1000, digest[:3], int.from_bytes(digest[3:5], "big"),
                           int.from_bytes(digest[5:8], "big"))


class DeadLetters:
    """The leader's dead-letter mover (module docstring)."""

    def __init__(
        self,
        machine: DeadLetterSource,
        propose: Callable[[bytes, bytes], int | None],
        is_leader: Callable[[], bool],
        *,
        max_data: int,
    ) -> None:
        """``propose(request_id, data)``: append through the topic gate at the leader (the
        index, or None when refused or not leading); ``max_data``: the entry size limit
        (``max_log_entry_data_size``) every publish is made to fit."""
        self._machine = machine
        self._max_data = max_data
        self._propose = propose
        self._is_leader = is_leader
        self._waiting: dict[str, int] = {}
        self.moved = 0

    def on_timer(self) -> None:
        """Called on every timer pass; cheap when no group has dead records."""
        if not self._is_leader():
            self._waiting.clear()
            return
        machine = self._machine
        table = machine.groups.table
        for name in sorted(table.with_dead):  # not every group: every timer pass runs this
            group = table.groups[name]
            if group.options.dead_letter is None:
                continue
            if self._waiting.get(name, 0) > machine.last_applied:
                continue
            self._move(name)

    def _move(self, name: str) -> None:
        machine = self._machine
        group = machine.groups.table.groups[name]
        dlq = group.options.dead_letter
        assert dlq is not None
        batch = sorted(group.dead.items())[:BATCH]
        if dlq not in machine.topics:  # create it; publish once the create is applied
            died = min(at for _, (_, _, at) in batch)
            create = encode_command(TopicCommand("create", dlq, {}))
            self._waiting[name] = self._propose(_request_id(b"create", dlq, [], died), create) or 0
            return
        items, _cut = records_within(machine.groups.source.iter_records(
            [key for key, _ in batch], machine.last_time), BATCH_BYTES)
        fitted = self._fitted(name, dlq, batch[: len(items)], items)
        if fitted is None:
            return  # a limit below any copy (the gate would refuse it too): nothing to propose
        count, data = fitted
        ids: list[list[object]] = [[t, r.index, r.position] for (t, r), _ in batch[:count]]
        died = min(at for _, (_, _, at) in batch[:count])
        published = self._propose(_request_id(b"dlq", name, ids, died), data)
        if published is None:
            return
        done = encode_group_command(GroupCommand("dead", name, {"ids": ids}))
        index = self._propose(_request_id(b"dead", name, ids, died), done)
        if index is not None:
            self._waiting[name] = index
            self.moved += len(ids)

    def _fitted(
        self, name: str, dlq: str, batch: list[DeadEntry], items: list[LoggedRecord | None]
    ) -> tuple[int, bytes] | None:
        """How many of ``batch`` to move and their publish, within one entry (module
        docstring): fewer records until it fits, then the one record slimmed."""
        largest = self._machine.topics[dlq].properties.max_record_bytes
        count, level = len(batch), 0
        while True:
            records = [_copy(name, dlq, dead, item, level)
                       for dead, item in zip(batch[:count], items[:count], strict=True)]
            data = encode_records(records)
            if len(data) <= self._max_data and (
                largest is None or max(r.size for r in records) <= largest
            ):
                return count, data
            if count > 1:
                count //= 2
            elif level + 1 < len(OMITTED):
                level += 1
            else:
                return None


DeadEntry: TypeAlias = tuple[tuple[str, RecordId], tuple[int, str, int]]
"""One dead record of a group: ``((topic, id), (attempts, reason, died at))``."""


def _copy(name: str, dlq: str, dead: DeadEntry, item: LoggedRecord | None, level: int) -> Record:
    """The dead-letter copy of one record, slimmed to ``level`` (``OMITTED``)."""
    (topic, rid), (attempts, reason, _) = dead
    record = None if item is None else item.record
    headers = dict(record.headers) if record is not None and level < 2 else {}
    if level >= 2:
        reason = reason.encode()[:REASON_KEPT].decode(errors="ignore")
    headers.update({
        HEADER_PREFIX + "group": name.encode(),
        HEADER_PREFIX + "topic": topic.encode(),
        HEADER_PREFIX + "id": f"{rid.index}:{rid.position}".encode(),
        HEADER_PREFIX + "attempts": str(attempts).encode(),
        HEADER_PREFIX + "reason": reason.encode(),
    })
    if level:
        headers[HEADER_PREFIX + "omitted"] = OMITTED[level].encode()
    value = record.value if record is not None and level == 0 else b""
    key = record.key if record is not None and level < 2 else None
    return Record(dlq, value, key, headers)
