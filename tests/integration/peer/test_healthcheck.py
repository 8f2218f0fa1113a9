"""The container healthcheck of deploy/docker/compose.yaml, run against real peers.

No Docker engine here, so the command itself is run the way the container runs it: its
arguments from the compose file, the local peer and the ident from the environment."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import yaml

from integration.cluster import PeerCluster

COMPOSE = Path(__file__).resolve().parents[3] / "deploy" / "docker" / "compose.yaml"


def _healthcheck(url: str, ident: str) -> tuple[int, float]:
    test = yaml.safe_load(COMPOSE.read_text())["services"]["peer1"]["healthcheck"]["test"]
    assert test[0] == "CMD"
    command = [str(Path(sys.executable).with_name(test[1])), *test[2:]]
    env = dict(os.environ, RAFTLOG_PEERS=url, RAFTLOG_IDENT=ident)
    env.pop("RAFTLOG_CONFIG", None)
    started = time.monotonic()
    done = subprocess.run(command, env=env, capture_output=True, timeout=60, check=False)
    return done.returncode, time.monotonic() - started


def test_healthy_with_a_leader_unhealthy_without(tmp_path: Path) -> None:
    with PeerCluster(tmp_path) as cluster:
        cluster.start()
        cluster.wait_leader()
        follower = next(p for p in cluster.peers if p != cluster.leader())
        code, _ = _healthcheck(cluster.peers[follower].url, cluster.ident)
        assert code == 0
        # one other peer down: this container stays healthy
        other = next(p for p in cluster.peers if p not in (follower, cluster.leader()))
        cluster.terminate(other)
        code, _ = _healthcheck(cluster.peers[follower].url, cluster.ident)
        assert code == 0
        cluster.stop()
        code, took = _healthcheck(cluster.peers[follower].url, cluster.ident)
        assert code == 3  # unavailable
        assert took < 8  # the compose healthcheck's own timeout
