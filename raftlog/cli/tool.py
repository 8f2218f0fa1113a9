# PYTHON_ARGCOMPLETE_OK
"""``raftlog-tool``: look inside a peer's data directory, back it up, repair an out-of-range
term.

``inspect``, ``dump`` and ``verify`` open the stores read-only (no lock taken, nothing
created), so they are safe to run next to a live peer; ``backup``/``restore``
(``raftlog.cli.tool_backup``) only create their destination. ``reset-term`` is the one command
that changes a data directory: it takes the database lock, so it refuses to run while the peer
is up (see :func:`cmd_reset_term` and docs/peer-service.md for when it is safe). Exit codes:
0 success, 1 corruption found (or no consistent backup), 2 usage error (bad arguments, missing
or foreign directory, peer running, refused reset).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
from collections.abc import Iterator, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import argcomplete
import msgpack

from raftlog.bounds import MAX_TERM
from raftlog.cli import tool_backup, tool_recover
from raftlog.cli.common import add_version_argument
from raftlog.entry import EntryType, LogEntry
from raftlog.errors import StorageCorruptionError, StorageError
from raftlog.storage._rocksdb import RocksDatabase
from raftlog.storage.offline import stopped_peer_stores
from raftlog.storage.private import loose_modes
from raftlog.storage.rocks import (
    LOG_DIR,
    SNAPSHOT_DIR,
    RocksHardStateStore,
    RocksLogStore,
    open_log_database,
)
from raftlog.storage.snapshot import FileSnapshotStore
from raftlog.storage.verify import verify_data_dir

EXIT_OK, EXIT_CORRUPT, EXIT_USAGE = 0, 1, 2
_PREVIEW_BYTES = 48
_DUMP_CHUNK_BYTES = 4 << 20


class UsageError(Exception):
    """A mistake of the caller (exit code 2), reported as one line without a traceback."""


def _check_data_dir(path: Path) -> None:
    if not path.exists():
        raise UsageError(f"{path}: no such directory")
    if not path.is_dir():
        raise UsageError(f"{path}: not a directory")
    if not (path / LOG_DIR / "CURRENT").is_file():
        raise UsageError(f"{path}: not a raftlog data directory (no {LOG_DIR}/ store)")


def _dir_size(path: Path) -> int:
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            with contextlib.suppress(OSError):  # a file compacted away while we walk
                total += (Path(root) / name).stat().st_size
    return total


def _type_name(entry_type: int) -> str:
    try:
        return EntryType(entry_type).name
    except ValueError:
        return f"UNKNOWN({entry_type})"


def _preview(entry: LogEntry) -> str:
    data = entry.data
    if entry.is_config or entry.is_checkpoint:
        try:
            return json.dumps(msgpack.unpackb(data, raw=False), ensure_ascii=False)[:200]
        except (ValueError, TypeError):
            pass
    head = data[:_PREVIEW_BYTES]
    more = "..." if len(data) > _PREVIEW_BYTES else ""
    try:
        text = head.decode("utf-8")
        if text.isprintable():
            return repr(text) + more
    except UnicodeDecodeError:
        pass
    return head.hex() + more


def _open_log(path: Path) -> tuple[RocksDatabase, RocksLogStore, RocksHardStateStore]:
    database = open_log_database(path / LOG_DIR, read_only=True)
    try:
        return database, RocksLogStore(database), RocksHardStateStore(database)
    except BaseException:
        database.release()
        raise


def cmd_inspect(args: argparse.Namespace) -> int:
    """``inspect``: a data directory's hard state, log bounds and snapshot, read-only."""
    path: Path = args.data_dir
    database, log, hard_state = _open_log(path)
    try:
        state = hard_state.load()
        info: dict[str, Any] = {
            "data_dir": str(path),
            "first_index": log.first_index,
            "last_index": log.last_index,
            "last_term": log.term_at(log.last_index),
            "entries": log.last_index - log.snapshot_index,
            "log_snapshot_index": log.snapshot_index,
            "log_snapshot_term": log.snapshot_term,
            "oldest_request_index": log.oldest_request_index(),
            "hard_state": {
                "current_term": state.current_term,
                "voted_for": state.voted_for,
                "config_index": state.config_index,
                "config": None
                if state.config is None
                else {
                    "new": [[p.id, p.url] for p in state.config.new],
                    "old": None
                    if state.config.old is None
                    else [[p.id, p.url] for p in state.config.old],
                },
                "last_applied": state.last_applied,
            },
            "log_bytes_on_disk": _dir_size(path / LOG_DIR),
        }
    finally:
        log.close()
        hard_state.close()
        database.release()
    snapshot_dir = path / SNAPSHOT_DIR
    info["snapshot"] = None
    if snapshot_dir.is_dir():
        snapshots = FileSnapshotStore(snapshot_dir, read_only=True, verify=False)
        meta = snapshots.meta()
        snapshots.close()
        if meta is not None:
            info["snapshot"] = {"index": meta.index, "term": meta.term, "size": meta.size}
    if args.json:
        print(json.dumps(info, ensure_ascii=False))
        return EXIT_OK
    for key, value in info.items():
        print(f"{key:22} {json.dumps(value, ensure_ascii=False)}")
    return EXIT_OK


def _entries(log: RocksLogStore, lo: int, hi: int) -> Iterator[tuple[int, LogEntry]]:
    index = lo
    while index < hi:
        for entry in log.entries(index, hi, max_bytes=_DUMP_CHUNK_BYTES):
            yield index, entry
            index += 1


def cmd_dump(args: argparse.Namespace) -> int:
    """``dump``: log entries of a range, one per line, read-only."""
    database, log, hard_state = _open_log(args.data_dir)
    try:
        lo = log.first_index if args.from_index is None else args.from_index
        hi = log.last_index if args.to_index is None else args.to_index
        if lo > hi:
            return EXIT_OK
        if lo < log.first_index or hi > log.last_index:
            raise UsageError(
                f"range {lo}..{hi} outside the log ({log.first_index}..{log.last_index})"
            )
        for index, entry in _entries(log, lo, hi + 1):
            row = {
                "index": index,
                "term": entry.term,
                "type": _type_name(entry.entry_type),
                "request_id": entry.request_id.hex(),
                "size": len(entry.data),
                "preview": _preview(entry),
            }
            if args.json:
                if args.data:
                    row["data_hex"] = entry.data.hex()
                print(json.dumps(row, ensure_ascii=False))
            else:
                print(
                    f"{index:>10} t{entry.term:<6} {row['type']:<10} {row['request_id']} "
                    f"{len(entry.data):>8}B {row['preview']}"
                )
    finally:
        log.close()
        hard_state.close()
        database.release()
    return EXIT_OK


def cmd_verify(args: argparse.Namespace) -> int:
    """``verify``: check every checksum of the log and the snapshot; exit 1 on corruption."""
    report = verify_data_dir(args.data_dir)
    loose, count = loose_modes(args.data_dir)  # a warning: readable is not corrupt
    for line in loose:
        print(f"WARNING: {line}")
    if count > len(loose):
        print(f"WARNING: ... and {count - len(loose)} more paths readable by group or others")
    if count:
        print("WARNING: data at rest should be private (chmod -R go= DATA_DIR; the peer "
              "tightens its data dir at start)")
    for problem in report.problems:
        print(f"CORRUPT: {problem}")
    if report.problem_count > len(report.problems):
        print(f"... and {report.problem_count - len(report.problems)} more problems")
    snapshot = "none" if report.snapshot_bytes is None else f"{report.snapshot_bytes} bytes"
    verdict = "OK" if report.ok else f"{report.problem_count} problem(s)"
    print(
        f"{verdict}: {report.entries} entries, {report.request_ids} request ids, "
        f"snapshot {snapshot}"
    )
    return EXIT_OK if report.ok else EXIT_CORRUPT


def cmd_reset_term(args: argparse.Namespace) -> int:
    """Set a *stopped* peer's current term to ``--term`` and clear its vote (issue #12).

    For data written before raftlog had a term ceiling: a forged RequestVote could leave a
    term above ``MAX_TERM`` on disk, and the peer then refuses to start (exit code 4). Refused
    unless the stored term is out of range (or ``--term`` raises it), ``--term`` is at most
    ``MAX_TERM`` and above every term in this peer's log. Lowering a term is safe only under
    the cluster-wide rule of docs/peer-service.md (``--term`` above every term any peer's log
    holds and every in-range term any running peer holds); the tool checks what it can see
    locally and the operator the rest."""
    path: Path = args.data_dir
    term: int = args.term
    if not 1 <= term <= MAX_TERM:
        raise UsageError(f"--term must be within 1..{MAX_TERM}")
    with stopped_peer_stores(path, UsageError) as (log, hard_state):
        state = hard_state.load()
        last_term = log.term_at(log.last_index) or 0
        if last_term > MAX_TERM:
            raise UsageError(
                f"the log itself holds entries of term {last_term} (above {MAX_TERM}); a term "
                "reset cannot repair that: rebuild this peer from the others (docs/peer-service.md)"
            )
        if term <= last_term:
            raise UsageError(f"--term {term} must be above the log's last term {last_term}")
        if state.current_term <= MAX_TERM and term < state.current_term:
            raise UsageError(
                f"current term {state.current_term} is in range; lowering it is never needed "
                "and could let this peer vote twice in one term"
            )
        hard_state.save(replace(state, current_term=term, voted_for=None))  # synced
    print(
        f"{path}: current term {state.current_term} -> {term}, vote "
        f"{state.voted_for!r} -> None (synced)"
    )
    return EXIT_OK


def build_parser() -> argparse.ArgumentParser:
    """The ``raftlog-tool`` command line (exit codes in the epilog)."""
    parser = argparse.ArgumentParser(
        prog="raftlog-tool",
        description="Inspect, dump, verify and back up a raftlog peer's data directory "
        "(read-only; safe next to a running peer); reset-term repairs a stopped peer's "
        "out-of-range term.",
        epilog="Exit codes: 0 success, 1 corruption found (or no consistent backup), "
        "2 usage error.",
    )
    add_version_argument(parser)
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    inspect = commands.add_parser(
        "inspect",
        help="show log bounds, terms, hard state, snapshot and sizes",
        epilog="example: raftlog-tool inspect data/1 --json",
    )
    dump = commands.add_parser(
        "dump",
        help="print entries of an index range",
        epilog="example: raftlog-tool dump data/1 --from 100 --to 120 --json --data",
    )
    verify = commands.add_parser(
        "verify",
        help="check every checksum and index; exit 1 on corruption",
        epilog="example: raftlog-tool verify /backup/raftlog-1-2026-11-23",
    )
    reset_term = commands.add_parser(
        "reset-term",
        help="set a STOPPED peer's out-of-range term (exit code 4 at start) to --term",
        description="Repair a data directory whose current term is above 2^48-1 (the peer "
        "exits 4 at start). Stop the peer first. Safe only when --term is above every log term "
        "of every peer and every in-range term of any peer still running; see "
        "docs/peer-service.md, 'Recovering from an out-of-range term'.",
        epilog="example: raftlog-tool reset-term data/2 --term 1000",
    )
    for sub in (inspect, dump, verify, reset_term):
        sub.add_argument("data_dir", metavar="DATA_DIR", type=Path, help="the peer's data dir")
    inspect.add_argument("--json", action="store_true", help="one JSON object")
    dump.add_argument("--from", dest="from_index", type=int, metavar="I", help="first index")
    dump.add_argument("--to", dest="to_index", type=int, metavar="J", help="last index (incl.)")
    dump.add_argument("--json", action="store_true", help="one JSON object per entry and line")
    dump.add_argument("--data", action="store_true", help="with --json: add the data as hex")
    reset_term.add_argument(
        "--term", type=int, required=True, metavar="T", help="the new current term"
    )
    reset_term.set_defaults(handler=cmd_reset_term)
    inspect.set_defaults(handler=cmd_inspect)
    dump.set_defaults(handler=cmd_dump)
    verify.set_defaults(handler=cmd_verify)
    tool_backup.add_commands(commands)
    tool_recover.add_command(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``raftlog-tool``: run one read-only command with one clear error line on
    failure."""
    parser = build_parser()
    argcomplete.autocomplete(parser)  # a no-op unless the shell asks for completions
    args = parser.parse_args(argv)
    try:
        _check_data_dir(args.data_dir)
        code: int = args.handler(args)
        return code
    except (UsageError, tool_recover.RecoveryRefusedError) as exc:
        print(f"raftlog-tool: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except StorageCorruptionError as exc:
        print(f"raftlog-tool: corruption: {exc}", file=sys.stderr)
        return EXIT_CORRUPT
    except StorageError as exc:
        print(f"raftlog-tool: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except BrokenPipeError:  # `raftlog-tool dump ... | head`
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
