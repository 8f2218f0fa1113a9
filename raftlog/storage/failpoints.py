"""Named failure points in the storage write path, for crash and disk-full tests.

``RAFTLOG_FAILPOINTS`` is parsed once, at import::

    RAFTLOG_FAILPOINTS="before_sync=crash,after_append=crash@3,before_snapshot_rename=error"

Each item is ``name=action`` with an optional ``@N``: the action fires from the N-th time the
point is reached on (default 1, i.e. every time). Actions:

* ``crash``     ``os._exit(137)``: the same as ``kill -9`` at that exact point;
* ``error``     raise ``StorageError`` (what an ENOSPC or EIO surfaces as), for full-disk tests;
* ``sleep(ms)`` block for ``ms`` milliseconds (a slow disk);
* ``skip``      a *bug switch* for negative controls: the step named by the point is left
  out. Only the points in ``SKIPPABLE`` accept it (a typo must not switch a bug on), and
  only while ``RAFTLOG_FAILPOINTS_UNSAFE`` is ``lose-acknowledged-writes`` too (no single
  setting switches a bug on by accident; the process then says so on stderr):

  - ``sync`` every RocksDB write goes to memory only (no WAL, no fsync), i.e. a peer that
    acknowledges before anything is durable and, on ``kill -9``, falls back to an older but
    self-consistent state (a disk that lied about fsync, then lost power);
  - ``log_sync`` the fsync of writes carrying log entries (appends, compactions) is left
    out: the WAL is written, so ``kill -9`` loses nothing and only a power cut can tell;
  - ``hard_state_sync`` the same for writes of the hard state alone (a vote, a new term);
  - ``snapshot_sync`` / ``snapshot_dir_sync`` the fsync of a new snapshot file / of its
    directory after the rename.

  The fault suite proves with them that its schedules catch a peer that breaks durability
  (tests/faults/test_negative_control.py, docs/reliability.md).

Points in use: ``before_sync`` (every synced write: log append/compact, hard state, snapshot
file and directory fsyncs), ``after_append``, ``after_compact``, ``before_snapshot_rename``,
``after_snapshot_rename``.

Zero cost when unset: call sites test the module-level ``ENABLED`` first::

    if failpoints.ENABLED:
        failpoints.hit("before_sync")
"""

from __future__ import annotations

import os
import re
import sys
import time
from dataclasses import dataclass
from typing import Final

from raftlog.errors import StorageError

ENV_VAR: Final = "RAFTLOG_FAILPOINTS"
UNSAFE_ENV_VAR: Final = "RAFTLOG_FAILPOINTS_UNSAFE"
UNSAFE_CONSENT: Final = "lose-acknowledged-writes"
"""The value ``UNSAFE_ENV_VAR`` must have for a ``skip`` (a bug switch) to be accepted."""
CRASH_EXIT_CODE: Final = 137

_ITEM = re.compile(
    r"^(?P<name>[a-z_]+)=(?P<action>crash|error|skip|sleep\((?P<ms>\d+)\))(@(?P<nth>\d+))?$"
)

SKIPPABLE: Final = frozenset(
    {"sync", "log_sync", "hard_state_sync", "snapshot_sync", "snapshot_dir_sync", "dir_sync"}
)
"""Points whose step a ``skip`` action may leave out (see the module docstring)."""


@dataclass(slots=True)
class _Failpoint:
    action: str
    sleep_ms: int
    from_hit: int
    hits: int = 0


_points: dict[str, _Failpoint] = {}
ENABLED = False
"""True when at least one failpoint is configured; call sites check it before ``hit``."""


def configure(spec: str | None, *, unsafe: str | None = None) -> None:
    """Replace the configured failpoints (``None`` or ``""`` disables them all).

    Called once at import with the environment variables; tests running in-process may call
    it again. Raises ``ValueError`` for a malformed spec so that a typo never silently
    disables a fault a test relies on, and for a ``skip`` without ``unsafe`` (default: the
    ``RAFTLOG_FAILPOINTS_UNSAFE`` environment variable) equal to ``UNSAFE_CONSENT``.
    """
    if unsafe is None:
        unsafe = os.environ.get(UNSAFE_ENV_VAR)
    global ENABLED  # noqa: PLW0603 - a plain module bool is what makes unset points free
    points: dict[str, _Failpoint] = {}
    for raw_item in (spec or "").split(","):
        item = raw_item.strip()
        if not item:
            continue
        match = _ITEM.match(item)
        if match is None:
            raise ValueError(
                f"bad failpoint {item!r} in {ENV_VAR} (want name=crash|error|skip|sleep(ms)[@N])"
            )
        action = match["action"].split("(")[0]
        if action == "skip" and match["name"] not in SKIPPABLE:
            raise ValueError(f"failpoint {match['name']!r} cannot skip (only {sorted(SKIPPABLE)})")
        if action == "skip" and unsafe != UNSAFE_CONSENT:
            raise ValueError(
                f"{item!r} switches a durability bug on: refused unless "
                f"{UNSAFE_ENV_VAR}={UNSAFE_CONSENT} (test-only)"
            )
        points[match["name"]] = _Failpoint(action, int(match["ms"] or 0), int(match["nth"] or 1))
    _points.clear()
    _points.update(points)
    ENABLED = bool(points)
    bugs = sorted(name for name, point in points.items() if point.action == "skip")
    if bugs:
        print(
            f"raftlog: TEST-ONLY durability bug switched on ({', '.join(bugs)}=skip): "
            "acknowledged writes can be lost",
            file=sys.stderr,
        )


def skipped(name: str) -> bool:
    """True if the step at ``name`` is switched off (``name=skip``) from this hit on."""
    point = _points.get(name)
    if point is None or point.action != "skip":
        return False
    point.hits += 1
    return point.hits >= point.from_hit


def hit(name: str) -> None:
    """Run the action configured for ``name``, if any (see the module docstring)."""
    point = _points.get(name)
    if point is None:
        return
    point.hits += 1
    if point.hits < point.from_hit:
        return
    if point.action == "crash":
        os._exit(CRASH_EXIT_CODE)
    if point.action == "error":
        raise StorageError(f"failpoint {name}: injected I/O error")
    if point.action == "sleep":
        time.sleep(point.sleep_ms / 1000)


configure(os.environ.get(ENV_VAR))
