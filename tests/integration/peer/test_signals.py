"""Signals on real peer processes, and ``raftlog-local-cluster``'s live console.

SIGHUP used to kill a peer (Python's default action, exit 129, nothing logged): now it
reopens the log file, re-reads the cluster file, logs one event and keeps serving.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from integration.cluster import PeerCluster, wait_for
from integration.peer.updates import update

LOCAL_CLUSTER_BIN = Path(sys.executable).with_name("raftlog-local-cluster")


def _events(path: Path, name: str) -> list[dict[str, object]]:
    if not path.exists():
        return []
    out = []
    for line in path.read_text().splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if record.get("event") == name:
            out.append(record)
    return out


def test_sighup_reopens_the_log_file_and_the_peer_keeps_serving(tmp_path: Path) -> None:
    log_file = tmp_path / "peer1-file.log"
    rotated = tmp_path / "peer1-file.log.1"
    with PeerCluster(tmp_path) as cluster:
        cluster.start("2", "3")
        cluster.start("1", extra_args=["--log-file", str(log_file)])
        cluster.wait_leader()
        wait_for("peer 1 logging to its file", lambda: _events(log_file, "peer_started"))
        process = cluster.peers["1"].process
        assert process is not None

        log_file.rename(rotated)  # logrotate moves the file, then sends SIGHUP
        process.send_signal(signal.SIGHUP)
        handled = wait_for("the SIGHUP event", lambda: _events(log_file, "sighup_handled"))
        assert handled[0]["log_reopened"] is True
        assert handled[0]["config_unchanged"] is True
        assert handled[0]["log_file"] == str(log_file)
        assert _events(rotated, "sighup_handled") == []

        # still a working member: answers, and the cluster commits through it
        assert process.poll() is None
        assert cluster.log_info("1") is not None
        update(cluster, b"after SIGHUP")

        # a changed option is reported as needing a restart, not applied and not fatal
        text = cluster.config_path.read_text()
        cluster.config_path.write_text(text.replace("[raft]", "[raft]\nelection_timeout_max = 900"))
        process.send_signal(signal.SIGHUP)
        wait_for("the second SIGHUP event", lambda: len(_events(log_file, "sighup_handled")) == 2)
        second = _events(log_file, "sighup_handled")[1]
        assert second["restart_required"] == ["election_timeout_max"]

        # an unreadable cluster file is reported, the peer goes on
        cluster.config_path.write_text("this is not toml [")
        process.send_signal(signal.SIGHUP)
        wait_for("the third SIGHUP event", lambda: len(_events(log_file, "sighup_handled")) == 3)
        assert "config_error" in _events(log_file, "sighup_handled")[2]
        assert process.poll() is None
        assert cluster.log_info("1") is not None
        assert cluster.terminate("1") == 0


def test_local_cluster_console_is_live_and_stops_cleanly(tmp_path: Path) -> None:
    """Peer lines reach the console while the peers run (the leader line highlighted), and
    Ctrl-C stops every peer."""
    cluster = PeerCluster(tmp_path)  # only for its cluster file with free ports
    launcher = subprocess.Popen(
        [str(LOCAL_CLUSTER_BIN), str(cluster.config_path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env=dict(os.environ, PYTHONUNBUFFERED="1"),
    )
    assert launcher.stdout is not None
    seen: list[str] = []
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            line = launcher.stdout.readline().decode()
            if not line:
                break
            seen.append(line.rstrip("\n"))
            # two peers can elect a leader while the third is still starting (slow under
            # load): wait for all three, a peer stopped before it started logs nothing
            started = sum("peer_started" in s for s in seen)
            if started == 3 and any(s.startswith(">>> ") and "became_leader" in s for s in seen):
                break
        assert any(s.startswith(">>> ") and "became_leader" in s for s in seen), seen
        assert any(s.startswith("CLIs: export PATH=") for s in seen)
        assert launcher.poll() is None  # the line arrived while everything still runs
        launcher.send_signal(signal.SIGINT)
        rest, _ = launcher.communicate(timeout=30)
        assert launcher.returncode == 0
        tail = rest.decode().splitlines()
        assert tail[-1] == "all peers stopped"
        assert sum("peer_stopped" in s for s in tail) == 3, tail
    finally:
        if launcher.poll() is None:  # stop the peers through the launcher, never orphan them
            launcher.send_signal(signal.SIGINT)
            try:
                launcher.wait(30)
            except subprocess.TimeoutExpired:
                launcher.kill()
                launcher.wait(10)


def _read_until(
    stream: Any, seen: list[str], done: Callable[[list[str]], bool], timeout: float = 60
) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and not done(seen):
        line = stream.readline().decode()
        if not line:
            break
        seen.append(line.rstrip("\n"))
    assert done(seen), seen


def test_local_cluster_keeps_running_when_one_peer_dies(tmp_path: Path) -> None:
    """kill -9 of one peer started by the launcher: it says so (with how to start it again)
    and the other two keep serving -- a local cluster is where one watches a failover."""
    cluster = PeerCluster(tmp_path)  # only for its cluster file with free ports
    launcher = subprocess.Popen(
        [str(LOCAL_CLUSTER_BIN), str(cluster.config_path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env=dict(os.environ, PYTHONUNBUFFERED="1"),
    )
    assert launcher.stdout is not None
    seen: list[str] = []
    try:
        _read_until(
            launcher.stdout,
            seen,
            lambda s: (
                sum("peer_started" in x for x in s) == 3
                and any(x.startswith(">>> ") and "became_leader" in x for x in s)
            ),
        )

        def probed_leader() -> str | None:
            for peer_id in cluster.peers:
                config = cluster.config_of(peer_id)
                if config is not None and config.is_leader:
                    return peer_id
            return None

        leader = wait_for("a leader", probed_leader, 30)
        victim = next(p for p in cluster.peers if p != leader)
        pids = subprocess.run(
            ["pgrep", "-f", f"{cluster.config_path} --id {victim}$"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.split()
        assert len(pids) == 1, pids
        os.kill(int(pids[0]), signal.SIGKILL)
        _read_until(launcher.stdout, seen, lambda s: any(f"peer {victim} exited" in x for x in s))
        assert any("signal 9" in x and "Start it again" in x for x in seen), seen[-5:]
        assert launcher.poll() is None  # the launcher and the other peers go on
        others = [p for p in cluster.peers if p != victim]
        assert all(cluster.log_info(p) is not None for p in others)
        launcher.send_signal(signal.SIGINT)
        rest, _ = launcher.communicate(timeout=30)
        assert launcher.returncode == 1  # a peer ended abnormally
        assert rest.decode().splitlines()[-1] == "all peers stopped"
    finally:
        if launcher.poll() is None:
            launcher.send_signal(signal.SIGINT)
            try:
                launcher.wait(30)
            except subprocess.TimeoutExpired:
                launcher.kill()
                launcher.wait(10)
