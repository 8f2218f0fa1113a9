"""``cluster_health``'s Nagios verdicts and ``status -o json`` (pure)."""

from __future__ import annotations

import json

from raftlog.cli.admin_health import (
    HEALTH_CRITICAL,
    HEALTH_DEGRADED,
    HEALTH_OK,
    cluster_health,
    status_json,
)
from raftlog.cli.admin_io import PeerRow
from raftlog.client import Peer
from raftlog.rpc.messages import RequestLogInfoResponse


def _row(pid: str, *, up: bool = True, leader: str | None = "1", term: int = 4) -> PeerRow:
    info = RequestLogInfoResponse(pid == leader, leader, term, 1, 9, 10, 10, 0, 0) if up else None
    return PeerRow(Peer(pid, f"tcp://127.0.0.1:{8000 + int(pid)}"), info)


def test_all_up_with_one_leader_is_ok() -> None:
    health = cluster_health([_row("1"), _row("2"), _row("3")])
    assert health.code == HEALTH_OK
    assert health.line == "RAFTLOG OK - 3/3 members up, leader 1, term 4"


def test_a_member_down_is_degraded() -> None:
    health = cluster_health([_row("1"), _row("2"), _row("3", up=False)])
    assert health.code == HEALTH_DEGRADED and "down: 3" in health.reason


def test_no_quorum_no_leader_or_nobody_is_critical() -> None:
    assert cluster_health([_row("1"), _row("2", up=False), _row("3", up=False)]).code == (
        HEALTH_CRITICAL
    )
    leaderless = cluster_health([_row(i, leader=None) for i in ("1", "2", "3")])
    assert leaderless.code == HEALTH_CRITICAL and "no leader" in leaderless.reason
    assert cluster_health([_row("1", up=False)]).code == HEALTH_CRITICAL
    assert cluster_health([]).code == HEALTH_CRITICAL


def test_disagreeing_peers_are_degraded() -> None:
    health = cluster_health([_row("1"), _row("2"), _row("3", leader="2")])
    assert health.code == HEALTH_DEGRADED and "disagree" in health.reason


def test_status_json_has_numbers_and_down_members() -> None:
    doc = json.loads(status_json([_row("1"), _row("2", up=False)], leader_last=10))
    first, second = doc["peers"]
    assert first["role"] == "leader" and first["commit_index"] == 10 and first["lag"] == 1
    assert second == {"id": "2", "url": "tcp://127.0.0.1:8002", "up": False}
