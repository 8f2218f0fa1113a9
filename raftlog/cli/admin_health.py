"""``raftlog-admin health`` and the machine-readable (``-o json``) cluster views.

``health`` follows the Nagios plugin convention, so any monitoring system that runs check
commands (Nagios, Icinga, Sensu, a cron job, a Kubernetes exec probe) can use it as is:

- 0 OK: every member of the configuration answers and exactly one leader is known;
- 1 WARNING (degraded): a quorum answers and a leader leads, but a member is down, peers
  disagree about the leader, or a peer's wall clock is far from the cluster clock (``CK``,
  ``raftlog.rpc.clock``: nothing is decided by it, but its timestamps mislead people);
- 2 CRITICAL: no leader, fewer members up than a quorum, or the cluster unreachable.

One line on stdout says why (``RAFTLOG OK - 3/3 members up, leader 1, term 4``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from raftlog.cli.admin_io import PeerRow
from raftlog.rpc.clock import ClockReading, clock_warning

HEALTH_OK: Final = 0
HEALTH_DEGRADED: Final = 1
HEALTH_CRITICAL: Final = 2
_LABELS: Final = {HEALTH_OK: "OK", HEALTH_DEGRADED: "WARNING", HEALTH_CRITICAL: "CRITICAL"}


@dataclass(frozen=True, slots=True)
class Health:
    """A verdict on the whole cluster: its Nagios exit code and the one-line reason."""

    code: int
    reason: str

    @property
    def label(self) -> str:
        """``OK``, ``WARNING`` or ``CRITICAL`` (Nagios)."""
        return _LABELS[self.code]

    @property
    def line(self) -> str:
        """The plugin output line."""
        return f"RAFTLOG {_LABELS[self.code]} - {self.reason}"


def cluster_health(
    rows: Sequence[PeerRow], clocks: Mapping[str, ClockReading | None] | None = None
) -> Health:
    """Judge the cluster from every member's own RequestLogInfo answer (``rows``: one per
    member of the configuration, or per seed peer when no leader gave the configuration) and
    its clock reading (``clocks`` by peer id; missing or None: not known, no warning)."""
    health = _membership_health(rows)
    warnings = [w for pid, r in sorted((clocks or {}).items()) if (w := clock_warning(pid, r))]
    if not warnings or health.code == HEALTH_CRITICAL:
        return health
    return Health(HEALTH_DEGRADED, f"{health.reason}; " + "; ".join(warnings))


def _membership_health(rows: Sequence[PeerRow]) -> Health:
    if not any(r.info is not None for r in rows):
        return Health(HEALTH_CRITICAL, "cluster unreachable: no peer answered")
    up = [r for r in rows if r.info is not None]
    down = [r.peer.id for r in rows if r.info is None]
    quorum = len(rows) // 2 + 1
    leaders = sorted({r.peer.id for r in up if r.is_leader})
    term = max((r.info.term for r in up if r.info is not None), default=0)
    counts = f"{len(up)}/{len(rows)} members up"
    if len(up) < quorum:
        return Health(HEALTH_CRITICAL, f"no quorum: {counts} (need {quorum}), down: {_ids(down)}")
    if not leaders:
        return Health(HEALTH_CRITICAL, f"no leader: {counts}, term {term}")
    seen = {
        r.info.leader_id
        for r in up
        if r.info is not None and not r.is_leader and r.info.leader_id is not None
    }
    if len(leaders) > 1 or (seen - {leaders[0]}):
        named = _ids([*leaders, *seen])
        return Health(HEALTH_DEGRADED, f"{counts}, peers disagree about the leader ({named})")
    if down:
        return Health(HEALTH_DEGRADED, f"{counts}, down: {_ids(down)}, leader {leaders[0]}")
    return Health(HEALTH_OK, f"{counts}, leader {leaders[0]}, term {term}")


def _ids(ids: Sequence[str]) -> str:
    return ",".join(sorted(set(ids)))


def status_json(rows: Sequence[PeerRow], leader_last: int | None) -> str:
    """``status -o json``: one object per peer (members, then the non-members it could
    see) with the table's facts as numbers."""
    return json.dumps({"peers": [_row_json(r, leader_last) for r in rows]}, indent=2)


def _row_json(row: PeerRow, leader_last: int | None) -> dict[str, Any]:
    out: dict[str, Any] = {
        "id": row.peer.id,
        "url": row.peer.url,
        "up": row.info is not None,
        "member": row.member,
        "role": row.role,
    }
    info = row.info
    if info is None:
        return out
    out.update(
        leader_id=info.leader_id,
        term=info.term,
        first_index=info.first_index,
        commit_index=info.commit_index,
        applied_index=info.last_applied,
        last_index=info.last_index,
        lag=None if leader_last is None else max(0, leader_last - info.last_applied),
        snapshot_size=info.snapshot_size,
    )
    return out
