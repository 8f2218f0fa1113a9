"""Argument checks shared by every ``LogStore`` implementation.

Kept in one place so that the in-memory store used by the simulator and the durable RocksDB
store refuse exactly the same calls (the conformance suite runs against both).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Final

from raftlog.entry import LogEntry
from raftlog.errors import EntryTooLargeError, StorageError

DEFAULT_MAX_ENTRY_DATA_SIZE: Final = 10 * 1024 * 1024
"""Largest entry data accepted by ``append`` unless the store is configured otherwise."""


def check_append_position(first_index: int, log_first: int, log_last: int) -> None:
    """``append`` may start anywhere from the first readable index up to just past the end."""
    if not log_first <= first_index <= log_last + 1:
        raise IndexError(f"append at index {first_index} outside [{log_first}, {log_last + 1}]")


def check_entry_sizes(entries: Sequence[LogEntry], limit: int) -> None:
    """Refuse the whole batch before anything is written if one entry is over ``limit``."""
    for entry in entries:
        if len(entry.data) > limit:
            raise EntryTooLargeError(len(entry.data), limit)


def check_commit_floor(
    first_index: int,
    entries: Sequence[LogEntry],
    commit_floor: int,
    log_last: int,
    term_at: Callable[[int], int | None],
) -> None:
    """Refuse an append that would remove or change an entry at or below ``commit_floor``.

    Re-writing committed entries with the same terms (a duplicated AppendEntries) is harmless
    and allowed; dropping one, or replacing it with an entry of another term, would lose a
    committed update, which can only be a bug in the caller or a corrupted peer.
    """
    last_checked = min(commit_floor, log_last)
    if first_index > last_checked:
        return
    for index in range(first_index, last_checked + 1):
        offset = index - first_index
        if offset >= len(entries) or entries[offset].term != term_at(index):
            raise StorageError(
                f"append at index {first_index} would truncate or overwrite committed entry "
                f"{index} (commit floor {commit_floor})"
            )


def check_range(lo: int, hi: int, log_first: int, log_last: int) -> None:
    """``entries(lo, hi)`` bounds check, identical for every implementation."""
    if lo < hi and (lo < log_first or hi > log_last + 1):
        raise IndexError(f"entries [{lo}, {hi}) outside [{log_first}, {log_last + 1})")
