"""``raftlog-tool backup`` and ``raftlog-tool restore``: consistent copies of a data dir.

Both run ``raftlog.storage.backup.backup_data_dir``: ``backup`` from a (possibly running)
peer's data directory into a new backup directory, ``restore`` from a backup into a new data
directory for a stopped (or not yet started) peer. Either way the result is verified before
it appears at its destination, with private modes (directories 0700, files 0600, whatever
the umask: ``raftlog.storage.private``). See docs/operations.md for when restoring is safe.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Any

from raftlog.storage.backup import BackupError, BackupReport, backup_data_dir
from raftlog.storage.private import private_umask, tighten_tree

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


def _run(args: argparse.Namespace, *, manifest: bool) -> int:
    dest: Path = args.dest
    if dest.exists() and (not dest.is_dir() or any(dest.iterdir())):
        print(
            f"raftlog-tool: error: {dest}: already exists and is not empty; choose a new directory",
            file=sys.stderr,
        )
        return EXIT_USAGE
    private_umask()  # issue #25: a copy is as private as the data dir it copies
    try:
        report = backup_data_dir(args.data_dir, dest, manifest=manifest)
    except BackupError as exc:
        print(f"raftlog-tool: {args.command} failed: {exc}")
        return EXIT_FAILED
    tighten_tree(dest)  # DEST itself may have existed (empty) with a looser mode
    _print(report, dest, args.json)
    return EXIT_OK


def _print(report: BackupReport, dest: Path, as_json: bool) -> None:
    if as_json:
        print(json.dumps({"dest": str(dest), **asdict(report)}))
        return
    snapshot = "none" if report.snapshot_index is None else f"at {report.snapshot_index}"
    print(
        f"OK: {dest}: entries {report.first_index}..{report.last_index} "
        f"(last term {report.last_term}), current term {report.current_term}, "
        f"applied {report.last_applied}, snapshot {snapshot}; "
        f"{report.keys} keys, {report.bytes_copied} bytes, verified"
    )


def cmd_backup(args: argparse.Namespace) -> int:
    """``raftlog-tool backup DATA_DIR DEST``: the copy gets a ``raftlog-backup.json``."""
    return _run(args, manifest=True)


def cmd_restore(args: argparse.Namespace) -> int:
    """``raftlog-tool restore BACKUP_DIR DEST``: a data dir, so no backup manifest."""
    return _run(args, manifest=False)


def add_commands(commands: Any) -> None:
    """Register ``backup`` and ``restore`` on the tool's sub-command parser."""
    backup = commands.add_parser(
        "backup",
        help="consistent, verified copy of a data dir (the peer may be running)",
        description="Copy DATA_DIR into the new directory DEST as of one instant: the log, "
        "request ids and hard state, and the snapshot. Safe while the peer runs; the copy "
        "is verified before it appears at DEST.",
        epilog="example: raftlog-tool backup /var/lib/raftlog/1 /backup/raftlog-1-$(date +%F)",
    )
    restore = commands.add_parser(
        "restore",
        help="turn a backup into a new data dir (peer stopped; see docs/operations.md)",
        description="Copy the backup BACKUP_DIR into the new data directory DEST and verify "
        "it. DEST must not exist or be empty: move the old data dir aside first.",
        epilog="example: raftlog-tool restore /backup/raftlog-1-2026-11-23 /var/lib/raftlog/1",
    )
    backup.add_argument("data_dir", metavar="DATA_DIR", type=Path, help="the peer's data dir")
    restore.add_argument("data_dir", metavar="BACKUP_DIR", type=Path, help="a backup")
    for sub in (backup, restore):
        sub.add_argument("dest", metavar="DEST", type=Path, help="new directory to create")
        sub.add_argument("--json", action="store_true", help="one JSON object")
    backup.set_defaults(handler=cmd_backup)
    restore.set_defaults(handler=cmd_restore)
