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
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping
from typing import Final, Protocol

from raftlog.ids import make_request_id
from raftlog.topics.groups.entry import GroupCommand, encode_group_command
from raftlog.topics.groups.host import GroupHost
from raftlog.topics.reads import READ_BUDGET
from raftlog.topics.records import (
    Record,
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
    ) -> None:
        """``propose(request_id, data)``: append through the topic gate at the leader (the
        index, or None when refused or not leading)."""
        self._machine = machine
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
        for group in list(machine.groups.table.groups.values()):
            if not group.dead or group.options.dead_letter is None:
                continue
            if self._waiting.get(group.name, 0) > machine.last_applied:
                continue
            self._move(group.name)

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
        batch = batch[: len(items)]
        ids: list[list[object]] = [[t, r.index, r.position] for (t, r), _ in batch]
        died = min(at for _, (_, _, at) in batch)
        records = []
        for ((topic, rid), (attempts, reason, _)), item in zip(batch, items, strict=True):
            headers = {} if item is None else dict(item.record.headers)
            headers.update({
                HEADER_PREFIX + "group": name.encode(),
                HEADER_PREFIX + "topic": topic.encode(),
                HEADER_PREFIX + "id": f"{rid.index}:{rid.position}".encode(),
                HEADER_PREFIX + "attempts": str(attempts).encode(),
                HEADER_PREFIX + "reason": reason.encode(),
            })
            value = b"" if item is None else item.record.value
            key = None if item is None else item.record.key
            records.append(Record(dlq, value, key, headers))
        published = self._propose(_request_id(b"dlq", name, ids, died), encode_records(records))
        if published is None:
            return
        done = encode_group_command(GroupCommand("dead", name, {"ids": ids}))
        index = self._propose(_request_id(b"dead", name, ids, died), done)
        if index is not None:
            self._waiting[name] = index
            self.moved += len(ids)
