"""``cluster_health``'s Nagios verdicts, ``status`` rows and ``-o json`` views (pure)."""

from __future__ import annotations

import json

import pytest

from raftlog.cli.admin_cluster import outside
from raftlog.cli.admin_health import (
    HEALTH_CRITICAL,
    HEALTH_DEGRADED,
    HEALTH_OK,
    cluster_health,
    status_json,
)
from raftlog.cli.admin_io import PeerRow, render_table
from raftlog.cli.admin_topics import topic_info_json
from raftlog.client import Peer
from raftlog.errors import RemoteProtocolError
from raftlog.rpc.clock import ClockReading, decode_clock_reading, encode_clock_reading
from raftlog.rpc.messages import RequestLogInfoResponse
from raftlog.topics.records import RecordId, TopicProperties
from raftlog.topics.wire import TopicInfo


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
    assert second == {
        "id": "2",
        "url": "tcp://127.0.0.1:8002",
        "up": False,
        "member": True,
        "role": "down",
    }


def test_peers_outside_the_configuration_show_as_client_and_not_members() -> None:
    outsider = PeerRow(_row("4").peer, _row("4").info, member=False)
    gone = PeerRow(_row("5").peer, None, member=False)
    doc = json.loads(status_json([_row("1"), outsider, gone], leader_last=10))
    assert [(p["id"], p["role"], p["member"]) for p in doc["peers"]] == [
        ("1", "leader", True),
        ("4", "client", False),
        ("5", "down", False),
    ]
    table = render_table([_row("1"), outsider], leader_last=10).splitlines()
    assert table[0].split()[-1] == "MEMBER"
    assert table[2].split()[2] == "client" and table[2].split()[-1] == "no"


def test_outside_lists_seeds_and_extra_peers_not_in_the_configuration() -> None:
    members = [Peer("1", "tcp://10.0.0.1:1"), Peer("2", "tcp://10.0.0.1:2")]
    seeds = ["tcp://10.0.0.1:1", "tcp://10.0.0.1:3", "tcp://10.0.0.1:9"]
    got = outside(
        members, seeds, {"tcp://10.0.0.1:3": "3"}, ["4=tcp://10.0.0.1:4", "9=tcp://10.0.0.1:9"]
    )
    assert got == [
        Peer("4", "tcp://10.0.0.1:4"),
        Peer("9", "tcp://10.0.0.1:9"),
        Peer("3", "tcp://10.0.0.1:3"),
    ]


def test_topic_describe_json_names_every_field() -> None:
    info = TopicInfo(
        "orders",
        TopicProperties(retention_ms=1000),
        created_index=3,
        first=RecordId(5, 0),
        last=RecordId(9, 2),
        last_append_time_ms=77,
        published_bytes=120,
    )
    doc = topic_info_json(info)
    assert doc["name"] == "orders" and doc["created_index"] == 3
    assert doc["properties"] == {
        "retention_ms": 1000,
        "max_bytes": None,
        "max_record_bytes": None,
        "description": None,
        "cleanup_policy": None,
        "tombstone_retention_ms": None,
    }
    assert doc["first"] == {"index": 5, "position": 0} and doc["low_water"] is None
    assert json.loads(json.dumps(doc)) == doc


def test_a_peer_whose_wall_clock_is_far_off_makes_the_cluster_degraded() -> None:
    """Issue #24: nothing is decided by a host's clock, but operators must see a bad one."""
    rows = [_row("1"), _row("2"), _row("3")]
    true_ms = 1_700_000_000_000
    clocks = {
        "1": ClockReading(true_ms + 3_600_000, true_ms),  # an hour ahead
        "2": ClockReading(true_ms + 2_000, true_ms),  # NTP-close enough
        "3": None,  # a reference peer: silent
    }
    health = cluster_health(rows, clocks)
    assert health.code == HEALTH_DEGRADED
    assert health.reason.endswith("peer 1 wall clock 3600s ahead of the cluster clock")
    assert cluster_health(rows, {"2": clocks["2"]}).code == HEALTH_OK
    behind = {"2": ClockReading(true_ms - 9 * 3_600_000, true_ms)}
    assert "peer 2 wall clock 32400s behind" in cluster_health(rows, behind).reason
    down = [_row("1"), _row("2", up=False), _row("3", up=False)]
    assert cluster_health(down, clocks).code == HEALTH_CRITICAL  # a worse verdict stays


def test_clock_readings_round_trip_on_the_wire() -> None:
    reading = ClockReading(1_700_000_000_123, 1_700_000_000_000)
    assert decode_clock_reading(encode_clock_reading(reading)) == reading
    assert reading.offset_ms == 123
    unknown = decode_clock_reading(encode_clock_reading(ClockReading(5, None)))
    assert unknown.cluster_ms is None and unknown.offset_ms is None
    with pytest.raises(RemoteProtocolError):
        decode_clock_reading([b"\x01"])
