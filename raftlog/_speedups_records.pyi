"""Types of the compiled twins in raftlog/_speedups_records.c (raftlog.speedups chooses)."""

from collections.abc import Callable, Iterable, Sequence

from raftlog.entry import LogEntry

def put_entries(
    put: Callable[[bytes, bytes], object], first_index: int, entries: Sequence[LogEntry]
) -> None: ...
def take_payloads(
    values: Iterable[bytes],
    first_index: int,
    max_bytes: int | None,
    on_bad: Callable[[int, bytes], object],
) -> tuple[list[bytes], bool]: ...
def parse_entries(
    cls: type[LogEntry], frames: Sequence[bytes], error_type: type[Exception]
) -> tuple[LogEntry, ...]: ...
def crc32(data: bytes, value: int = 0) -> int: ...
