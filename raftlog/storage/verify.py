"""Offline integrity check of a peer's data directory (used by ``raftlog-tool verify``).

Reads every record of the RocksDB store through a strict iterator (RocksDB block checksums),
checks our CRC on each, that the entry keys are exactly ``first_index..last_index`` from the
meta record, that the request-id index and its by-index mirror agree with the entries, and
re-reads the snapshot file against its checksum. Opens everything read-only.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from raftlog.entry import REQUEST_ID_SIZE, LogEntry
from raftlog.errors import EntryFormatError, StorageError
from raftlog.storage import _records as rec
from raftlog.storage._rocksdb import RocksDatabase
from raftlog.storage.rocks import LOG_DIR, SNAPSHOT_DIR, open_log_database
from raftlog.storage.snapshot import FileSnapshotStore

MAX_REPORTED = 50
"""Problems listed individually; beyond this only the count grows."""


@dataclass
class VerifyReport:
    """What ``raftlog-tool verify`` found: counts and the first problems (bounded)."""
    entries: int = 0
    request_ids: int = 0
    snapshot_bytes: int | None = None
    problem_count: int = 0
    problems: list[str] = field(default_factory=list)

    def add(self, problem: str) -> None:
        """Count a problem; keep its text while fewer than ``MAX_REPORTED`` are kept."""
        self.problem_count += 1
        if len(self.problems) < MAX_REPORTED:
            self.problems.append(problem)

    @property
    def ok(self) -> bool:
        """Whether no problem was found."""
        return self.problem_count == 0


class _Checker:
    """Consumes records in key order (``e`` < ``m`` < ``r`` < ``x``) in constant memory."""

    def __init__(self, report: VerifyReport, database: RocksDatabase) -> None:
        self.report = report
        self.database = database
        self.meta: tuple[int, int, int] | None = None
        self.first_entry: int | None = None
        self.previous_entry: int | None = None

    def record(self, key: bytes, value: bytes) -> None:
        try:
            if key.startswith(rec.ENTRY_PREFIX) and len(key) == 9:
                self._entry(rec.key_index(key), value)
            elif key == rec.META_KEY:
                self.meta = rec.decode_meta(value)
            elif key == rec.HARD_STATE_KEY:
                rec.decode_hard_state(value)
            elif key.startswith(rec.REQUEST_PREFIX) and len(key) == 1 + REQUEST_ID_SIZE:
                body = rec.unseal(key, value, f"request id {key[1:].hex()}")
                self._request_id(key[1:], int.from_bytes(body, "big"))
            elif key.startswith(rec.REQUEST_BY_INDEX_PREFIX) and len(key) == 9:
                rec.unseal(key, value, f"request id of entry {rec.key_index(key)}")
            else:
                self.report.add(f"unexpected key {key[:40].hex()}")
        except (StorageError, EntryFormatError) as exc:
            self.report.add(str(exc))

    def _entry(self, index: int, value: bytes) -> None:
        if self.previous_entry is not None and index != self.previous_entry + 1:
            self.report.add(f"entries {self.previous_entry + 1}..{index - 1} missing")
        if self.first_entry is None:
            self.first_entry = index
        self.previous_entry = index
        self.report.entries += 1
        LogEntry.from_bytes(rec.entry_payload(index, value))

    def _request_id(self, request_id: bytes, index: int) -> None:
        self.report.request_ids += 1
        mirror = self.database.get(rec.request_by_index_key(index), "request-id mirror")
        if mirror is None or rec.unseal(rec.request_by_index_key(index), mirror, "") != request_id:
            self.report.add(f"request id {request_id.hex()} -> {index}: by-index mirror differs")
        snapshot_index, _term, last_index = self.meta or (0, 0, 0)
        if snapshot_index < index <= last_index:
            value = self.database.get(rec.entry_key(index), f"entry {index}")
            if rec.entry_payload(index, value)[:REQUEST_ID_SIZE] != request_id:
                self.report.add(f"request id {request_id.hex()} -> {index}: entry has another id")

    def finish(self) -> None:
        if self.meta is None:
            if self.first_entry is not None:
                self.report.add("log meta record missing")
            return
        snapshot_index, _term, last_index = self.meta
        if last_index == snapshot_index:
            if self.first_entry is not None:
                self.report.add(f"entries {self.first_entry}.. present in an empty log")
            return
        if self.first_entry != snapshot_index + 1 or self.previous_entry != last_index:
            self.report.add(
                f"entries {self.first_entry}..{self.previous_entry} present, "
                f"meta says {snapshot_index + 1}..{last_index}"
            )


def verify_data_dir(data_dir: str | Path, *, peer: bool = True) -> VerifyReport:
    """Check everything under ``data_dir``; raises ``StorageError`` only if it cannot be opened
    at all (missing directory, unreadable RocksDB: a corrupted WAL refuses to open). ``peer``:
    also what a peer needs of the stores together — a snapshot covering the log's compaction
    point (False for store-level tests that compact and snapshot independently)."""
    root = Path(data_dir)
    if not root.is_dir():
        raise StorageError(f"{root}: no such data directory")
    report = VerifyReport()
    database = open_log_database(root / LOG_DIR, read_only=True)
    try:
        checker = _Checker(report, database)
        try:
            for key, value in database.scan_all("the whole store"):
                checker.record(key, value)
        except StorageError as exc:
            report.add(str(exc))
        checker.finish()
    finally:
        database.release()
    if (root / SNAPSHOT_DIR).is_dir():
        try:
            snapshots = FileSnapshotStore(root / SNAPSHOT_DIR, read_only=True, verify=True)
            meta = snapshots.meta()
            report.snapshot_bytes = None if meta is None else meta.size
            compacted = checker.meta[0] if checker.meta else 0
            if peer and compacted and (meta is None or meta.index < compacted):
                have = "no snapshot" if meta is None else f"a snapshot only up to {meta.index}"
                report.add(f"the log was compacted up to {compacted} but there is {have}")
            snapshots.close()
        except StorageError as exc:
            report.add(str(exc))
    return report
