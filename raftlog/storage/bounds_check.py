"""Start-up check: no term or index above the ceiling of :mod:`raftlog.bounds` on disk.

A peer that loaded such a value would campaign for ``term + 1``, fail to encode it and exit --
at every restart (issue #12, finding 1). It refuses to start instead, with one line that names
the value found and the offline repair, ``raftlog-tool reset-term`` (docs/peer-service.md).
"""

from __future__ import annotations

from pathlib import Path

from raftlog.bounds import MAX_INDEX, MAX_TERM
from raftlog.errors import DurableStateOutOfRangeError
from raftlog.storage.base import HardState, LogStore


def check_durable_bounds(data_dir: Path, hard_state: HardState, log: LogStore) -> None:
    """Raise :class:`DurableStateOutOfRangeError` when a stored term or index is too large."""
    last_term = log.term_at(log.last_index) or 0
    problems = []
    if hard_state.current_term > MAX_TERM:
        problems.append(f"current term {hard_state.current_term}")
    if last_term > MAX_TERM:
        problems.append(f"last log term {last_term}")
    if log.last_index > MAX_INDEX:
        problems.append(f"last log index {log.last_index}")
    if not problems:
        return
    raise DurableStateOutOfRangeError(
        f"{data_dir}: {' and '.join(problems)} above the ceiling 2^48-1 (a forged or corrupt "
        f"message?); stop this peer and run `raftlog-tool reset-term {data_dir} --term T` "
        "as described in docs/peer-service.md (Recovering from an out-of-range term)"
    )
