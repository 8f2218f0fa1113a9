"""Opening the topic state machine at start-up: caught up to the peer's applied index.

Why a module of its own: opening is the one step that may replay the log into the index
(after a crash or with the index deleted) and seeds the monitoring totals; keeping it apart
keeps ``topics`` to the rules of applying.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from raftlog.storage.base import SnapshotStore
from raftlog.topics.machine import TopicStateMachine
from raftlog.topics.retention import EntrySource

__all__ = ["open_topic_machine"]


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
        machine.counters.seed_all(machine)  # the monitoring totals, from the index
    except BaseException:
        machine.close()
        raise
    return machine
