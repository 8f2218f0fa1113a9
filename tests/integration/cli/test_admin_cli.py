"""raftlog-admin against a real cluster: what it prints and the exit codes scripts rely on."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from integration.cluster import PeerCluster, wait_for

ADMIN = Path(sys.executable).with_name("raftlog-admin")


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[PeerCluster]:
    with PeerCluster(tmp_path, raft={"log_compaction_threshold": 0}) as c:
        c.start()
        c.wait_leader()
        yield c


def admin(cluster: PeerCluster, *args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(ADMIN), "--config", str(cluster.config_path), "--timeout", "20", *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_status_publish_read_and_tail(cluster: PeerCluster) -> None:
    status = admin(cluster, "status")
    assert status.returncode == 0, status.stderr
    rows = status.stdout.splitlines()
    assert rows[0].split()[:3] == ["ID", "URL", "ROLE"]
    assert sorted(r.split()[2] for r in rows[1:]) == ["follower", "follower", "leader"]
    published = admin(cluster, "publish", stdin="one\ntwo\nthree\n")
    assert published.returncode == 0 and "published 3 record(s)" in published.stdout
    read = admin(cluster, "read", "--json")
    values = [json.loads(line)["data"] for line in read.stdout.splitlines()]
    assert values == ["one", "two", "three"]
    tail = admin(cluster, "tail", "-n", "1")
    assert tail.stdout.strip().endswith("three")


def test_topics_commands_and_refusals(cluster: PeerCluster) -> None:
    assert admin(cluster, "topics", "create", "events", "--max-record-bytes", "100").returncode == 0
    assert admin(cluster, "topics", "list").stdout.split() == ["events"]
    assert admin(cluster, "publish", "--topic", "events", stdin="a\nb\n").returncode == 0
    read = admin(cluster, "read", "--topic", "events", "--json")
    assert [json.loads(x)["value"] for x in read.stdout.splitlines()] == ["a", "b"]
    described = admin(cluster, "topics", "describe", "events").stdout
    assert re.search(r"^max_record_bytes +100$", described, re.M)  # columns widen with names
    refused = admin(cluster, "publish", "--topic", "missing", stdin="x\n")
    assert refused.returncode == 1 and "UnknownTopic" in refused.stderr
    too_big = admin(cluster, "publish", "--topic", "events", stdin="y" * 200 + "\n")
    assert too_big.returncode == 1 and "RecordTooLarge" in too_big.stderr


def test_membership_commands_and_exit_codes(cluster: PeerCluster) -> None:
    outsider = cluster.add_outsider("4")
    cluster.start("4")
    # a CLIENT-state peer binds only after its catch-up: slow on a loaded machine
    wait_for("the outsider answers", lambda: cluster.log_info("4"), timeout=60)
    dry = admin(cluster, "config", "add", f"4={outsider.url}", "--dry-run")
    assert dry.returncode == 0 and "dry run" in dry.stdout
    added = admin(cluster, "config", "add", f"4={outsider.url}")
    assert added.returncode == 0, added.stderr
    assert "joint configuration" in added.stdout and "final configuration" in added.stdout
    wait_for(
        "peer 4 in the configuration",
        lambda: "4" in admin(cluster, "config", "show").stdout.split()[3::3],  # ID URL ROLE
    )
    removed = admin(cluster, "config", "remove", "4")
    assert removed.returncode == 0, removed.stderr
    assert admin(cluster, "config", "remove", "9").returncode == 2  # not a member: usage
    assert admin(cluster, "config", "add", "bad-peer").returncode == 2
    down = subprocess.run(
        [str(ADMIN), "--peers", "tcp://127.0.0.1:9", "--ident", "x", "--timeout", "1", "status"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert down.returncode == 3


def test_health_status_exit_codes_and_json_when_a_follower_dies(cluster: PeerCluster) -> None:
    healthy = admin(cluster, "health")
    assert healthy.returncode == 0, healthy.stdout + healthy.stderr
    assert healthy.stdout.startswith("RAFTLOG OK - 3/3 members up")
    doc = json.loads(admin(cluster, "-o", "json", "status").stdout)
    assert sorted(p["role"] for p in doc["peers"]) == ["follower", "follower", "leader"]
    shown = json.loads(admin(cluster, "-o", "json", "config", "show").stdout)
    assert len(shown["peers"]) == 3 and shown["leader_id"] == cluster.leader()
    leader = cluster.wait_leader()
    follower = next(p for p in cluster.peers if p != leader)
    cluster.kill(follower)
    degraded = admin(cluster, "health")
    assert degraded.returncode == 1, degraded.stdout + degraded.stderr
    assert f"down: {follower}" in degraded.stdout
    status = admin(cluster, "status")
    assert status.returncode == 1 and "down" in status.stdout
    assert f"member(s) down: {follower}" in status.stderr
    others = [p for p in cluster.peers if p not in (follower, leader)]
    cluster.kill(others[0])
    critical = admin(cluster, "health")
    assert critical.returncode == 2, critical.stdout + critical.stderr
    assert critical.stdout.startswith("RAFTLOG CRITICAL")


def test_status_shows_a_peer_outside_the_configuration_and_topics_as_json(
    cluster: PeerCluster,
) -> None:
    outsider = cluster.add_outsider("4")
    cluster.start("4")
    wait_for("the outsider answers", lambda: cluster.log_info("4"))
    also = f"4={outsider.url}"
    status = admin(cluster, "status", "--also", also)
    assert status.returncode == 0, status.stderr  # a non-member is never "a member down"
    rows = {r.split()[0]: r.split() for r in status.stdout.splitlines()[1:]}
    assert rows["4"][2] == "client" and rows["4"][-1] == "no"
    assert all(rows[p][-1] == "yes" for p in ("1", "2", "3"))
    doc = json.loads(admin(cluster, "-o", "json", "status", "--also", also).stdout)
    mine = next(p for p in doc["peers"] if p["id"] == "4")
    assert (mine["role"], mine["member"], mine["up"]) == ("client", False, True)
    cluster.kill("4")
    gone = admin(cluster, "status", "--also", also)
    assert gone.returncode == 0, gone.stderr  # only members decide the exit code

    assert admin(cluster, "topics", "create", "events", "--retention-ms", "60000").returncode == 0
    listed = json.loads(admin(cluster, "-o", "json", "topics", "list").stdout)
    assert listed == {"topics": ["events"]}
    assert admin(cluster, "publish", "--topic", "events", stdin="a\nb\n").returncode == 0
    described = json.loads(admin(cluster, "-o", "json", "topics", "describe", "events").stdout)
    assert described["name"] == "events"
    assert described["properties"]["retention_ms"] == 60000
    assert described["first"]["position"] == 0 and described["last"]["position"] == 0
    assert described["published_bytes"] == 2
