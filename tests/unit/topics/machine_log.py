"""The memory log the topic state machine tests apply: one home for the helpers that append
topic entries the way a leader stamps them (``conftest.py`` serves it as the ``log`` fixture,
modules with more entry kinds subclass it)."""

from __future__ import annotations

from collections.abc import Sequence

from raftlog.entry import EntryType, LogEntry
from raftlog.storage.memory import MemoryLogStore
from raftlog.topics.groups.client import group_data
from raftlog.topics.machine import TopicStateMachine
from raftlog.topics.records import (
    Expectation,
    Record,
    TopicCommand,
    encode_clock_tick,
    encode_command,
)
from raftlog.topics.records_kv import encode_conditional
from raftlog.topics.stamp import stamp_append_time


class Log:
    """A memory log plus helpers that append topic entries the way a leader would."""

    def __init__(self) -> None:
        self.store = MemoryLogStore()
        self.now = 1_000_000

    def add(self, data: bytes, entry_type: int = EntryType.STATE) -> int:
        index = self.store.last_index + 1
        rid = index.to_bytes(12, "big") if entry_type != EntryType.CHECKPOINT else bytes(12)
        self.store.append(index, [LogEntry(rid, entry_type, 1, data)])
        return index

    def create(self, name: str, **props: int | str | None) -> int:
        return self.add(encode_command(TopicCommand("create", name, props)))

    def publish(
        self,
        *records: Record,
        at: int | None = None,
        auto: bool = False,
        expect: Sequence[Expectation] = (),
    ) -> int:
        """One batch stamped at ``at`` (default: the log's clock); with ``expect`` a
        conditional batch (without, ``encode_conditional`` is the plain record batch)."""
        data = stamp_append_time(
            encode_conditional(records, expect), self.now if at is None else at, auto_create=auto
        )
        return self.add(data)

    def group(self, op: str, name: str, args: dict[str, object]) -> int:
        """A consumer-group command, stamped like every topic entry a leader appends."""
        return self.add(stamp_append_time(group_data(op, name, args), self.now))  # type: ignore[arg-type]

    def tick(self, at: int) -> int:
        """The leader's clock tick: moves the log clock that retention reads."""
        self.now = at
        return self.add(encode_clock_tick(at))

    def apply(self, machine: TopicStateMachine) -> None:
        lo = machine.last_applied + 1
        machine.apply(lo, self.store.raw_entries(lo, self.store.last_index + 1), 1)
