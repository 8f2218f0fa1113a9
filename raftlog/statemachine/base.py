"""What a peer needs from the state machine it applies committed entries to.

The peer's driver calls :meth:`StateMachine.apply` with every committed entry, in log order
and exactly once per run (after a restart, entries after the persisted ``last_applied`` are
applied again, so ``apply`` must tolerate a replay of a suffix). CONFIG and CHECKPOINT entries
are part of the sequence: a state machine skips their data but must still advance past them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final, Protocol

from raftlog.entry import LogEntry, parse_entries

STEP_ROWS: Final = 1_000
"""Rows (topic versions, topics, compacted copies) one step of a snapshot build reads at
most: ~5-30 ms of the loop."""


class SnapshotBuild(Protocol):
    """A snapshot being built a step at a time while the machine goes on applying (the
    compaction policy steps it on the peer's timer passes; ``raftlog.topics.snapshot_build``)."""

    @property
    def cancelled(self) -> bool:
        """A snapshot restore made it void: it never completes."""
        ...

    def step(self, rows: int = ...) -> bytes | None:
        """Build some more (at most about ``rows`` rows read); the snapshot once complete."""
        ...


def built_at_once(build: SnapshotBuild) -> bytes:
    """``build`` stepped to its end now: ``snapshot`` (tools, tests); the peer steps its
    builds on the timer passes instead (``raftlog.server.compaction``)."""
    while (data := build.step(1 << 62)) is None:
        if build.cancelled:
            raise RuntimeError("the snapshot build was cancelled by a restore")
    return data


class BuiltSnapshot:
    """A snapshot taken at once (a machine whose state is small): its first step has it."""

    cancelled = False

    def __init__(self, data: bytes) -> None:
        self.data = data

    def step(self, rows: int = 0) -> bytes | None:
        """The snapshot (it was taken at once)."""
        return self.data


class StateMachine(Protocol):
    """What the peer applies committed entries to (see the module docstring); the broadcast and
    topic machines implement it, the composite combines them."""

    @property
    def last_applied(self) -> int:
        """Index of the last entry applied (0 when none)."""
        ...

    def apply(self, first_index: int, entries: Sequence[bytes], term: int) -> None:
        """Apply serialized entries ``first_index, first_index + 1, ...`` (``term`` is the
        peer's current term, for broadcasting)."""
        ...

    def set_leader(self, is_leader: bool, term: int) -> None:
        """The peer's role changed: only the leader publishes (docs/protocol.md §11)."""
        ...

    def restore(self, index: int, term: int, data: bytes) -> None:
        """Replace the state with a snapshot covering everything up to ``index``."""
        ...

    def snapshot(self, index: int) -> bytes:
        """The state as of ``index`` (at most ``last_applied``), for compaction."""
        ...

    def snapshot_build(self, index: int) -> SnapshotBuild:
        """:meth:`snapshot`, to be built a step at a time while apply goes on."""
        ...

    def handle_request(self, msg_type: bytes, args: Sequence[bytes]) -> list[bytes] | None:
        """A client request of a type the core does not handle (docs/protocol.md §10.6): the reply
        frames (the id is prepended by the caller), or None for no reply."""
        ...

    def on_timer(self, now: float) -> float:
        """Periodic work (heartbeats); returns the monotonic time it wants to run next."""
        ...

    def close(self) -> None:
        """Release sockets and files (the peer is stopping)."""
        ...


def decode_entries(raw: Sequence[bytes]) -> list[LogEntry]:
    """Helper for state machines that want typed entries."""
    return list(parse_entries(raw))
