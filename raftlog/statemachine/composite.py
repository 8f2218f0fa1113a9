"""Several state machines applied as one: every machine sees every committed entry.

A peer runs the BroadcastStateMachine (the wire's fan-out) next to raftlog's own machines
(e.g. the topic index). Each keeps its own ``last_applied``; the composite's is the smallest,
so after a crash every machine is brought forward from the same point and skips what it has
already applied (``apply`` must tolerate a replayed prefix). Client requests of a type the
core does not handle go to the first machine that answers them.

Snapshots hold every machine's snapshot in one MessagePack map keyed by the machine's
``name``; a machine missing from a snapshot is restored from empty data.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import msgpack

from raftlog.statemachine.base import STEP_ROWS, SnapshotBuild, StateMachine, built_at_once


class NamedStateMachine(StateMachine, Protocol):
    """A state machine that can be part of a composite: its name keys its part of the composite
    snapshot."""

    @property
    def name(self) -> str:
        """Key of this machine's part of a composite snapshot."""
        ...


class CompositeStateMachine:
    """Several state machines applied in step as one, so the peer's driver, snapshots and
    compaction see a single state machine."""

    def __init__(self, machines: Sequence[NamedStateMachine]) -> None:
        if not machines:
            raise ValueError("a composite needs at least one state machine")
        self.machines = tuple(machines)

    @property
    def last_applied(self) -> int:
        """The lowest applied index of the parts: what is applied everywhere (commit restarts
        from here)."""
        machines = self.machines
        if len(machines) == 2:  # the peer's pair, asked once per update: no generator
            return min(machines[0].last_applied, machines[1].last_applied)
        return min(m.last_applied for m in machines)

    def apply(self, first_index: int, entries: Sequence[bytes], term: int) -> None:
        """Apply the same entries to every part, in order."""
        for machine in self.machines:
            machine.apply(first_index, entries, term)

    def set_leader(self, is_leader: bool, term: int) -> None:
        """Tell every part about the role change."""
        for machine in self.machines:
            machine.set_leader(is_leader, term)

    def restore(self, index: int, term: int, data: bytes) -> None:
        """Restore every part from its named piece of the snapshot (a part missing from an older
        snapshot restores from empty data)."""
        parts = _unpack(data)
        for machine in self.machines:
            machine.restore(index, term, parts.get(machine.name, b""))

    def snapshot(self, index: int) -> bytes:
        """One snapshot holding every part's, keyed by name (MessagePack map)."""
        return built_at_once(self.snapshot_build(index))

    def snapshot_build(self, index: int) -> CompositeBuild:
        """:meth:`snapshot`, each part built a step at a time in turn."""
        return CompositeBuild([(m.name, m.snapshot_build(index)) for m in self.machines])

    def handle_request(self, msg_type: bytes, args: Sequence[bytes]) -> list[bytes] | None:
        """The first part that handles ``msg_type`` answers; None when none does."""
        for machine in self.machines:
            answer = machine.handle_request(msg_type, args)
            if answer is not None:
                return answer
        return None

    def on_timer(self, now: float) -> float:
        """Run every part's timer; the earliest time any wants to run next."""
        return min(machine.on_timer(now) for machine in self.machines)

    def close(self) -> None:
        """Close every part."""
        for machine in self.machines:
            machine.close()


def _unpack(data: bytes) -> dict[str, bytes]:
    """Machine snapshots by name; anything else (e.g. a snapshot written by a single machine)
    counts as no data for every machine."""
    try:
        value = msgpack.unpackb(data, raw=False) if data else {}
    except (ValueError, msgpack.UnpackException):
        return {}
    if not isinstance(value, dict):
        return {}
    return {k: v for k, v in value.items() if isinstance(k, str) and isinstance(v, bytes)}


class CompositeBuild:
    """The parts' builds, one after the other; the bytes of ``snapshot`` at the end."""

    def __init__(self, parts: list[tuple[str, SnapshotBuild]]) -> None:
        self._parts = parts
        self._data: dict[str, bytes] = {}

    @property
    def cancelled(self) -> bool:
        """A part's build was made void (a restore): the whole never completes."""
        return any(build.cancelled for _, build in self._parts)

    def step(self, rows: int = STEP_ROWS) -> bytes | None:
        """Step the first unfinished part; every part's bytes, packed, once all are done."""
        if self.cancelled:
            return None
        for name, build in self._parts:
            if name not in self._data:
                data = build.step(rows)
                if data is None:
                    return None
                self._data[name] = data
                return None if len(self._data) < len(self._parts) else self._packed()
        return self._packed()

    def _packed(self) -> bytes:
        packed: bytes = msgpack.packb({name: self._data[name] for name, _ in self._parts})
        return packed
