"""deploy/: the systemd unit, the container image and the three-peer compose file.

No Docker engine runs in CI, so the image is not built here; what can be checked without
one is: the compose file loads as YAML and describes three peers that agree with the
cluster file they mount (addresses, volumes, graceful stop, a healthcheck through an
existing CLI), the Dockerfile runs the peer as a non-root user with a data volume, and the
systemd unit passes ``systemd-analyze verify`` (where systemd is installed) with the
settings a graceful, restartable, confined service needs.
"""

from __future__ import annotations

import configparser
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from raftlog.config import load_cluster_file, load_peer_config

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
COMPOSE = DEPLOY / "docker" / "compose.yaml"
UNIT = DEPLOY / "systemd" / "raftlog-peer@.service"


def _compose() -> dict[str, object]:
    doc = yaml.safe_load(COMPOSE.read_text())
    assert isinstance(doc, dict)
    return doc


def test_compose_runs_three_peers_matching_the_cluster_file() -> None:
    doc = _compose()
    services = doc["services"]
    assert isinstance(services, dict) and sorted(services) == ["peer1", "peer2", "peer3"]
    cluster_file = DEPLOY / "docker" / "cluster.toml"
    ids = [str(p["id"]) for p in load_cluster_file(cluster_file)["peers"]]
    assert ids == ["1", "2", "3"]
    subnet = doc["networks"]["raft"]["ipam"]["config"][0]["subnet"]  # type: ignore[index]
    assert subnet == "172.28.0.0/24"
    volumes = doc["volumes"]
    for peer_id in ids:
        service = services[f"peer{peer_id}"]
        settings = load_peer_config(cluster_file, peer_id)
        address = service["networks"]["raft"]["ipv4_address"]
        assert settings.url == f"tcp://{address}:8047"
        assert settings.pub_url == f"tcp://{address}:8048"
        assert service["command"] == ["--id", peer_id]
        # the healthcheck asks the local peer, with the cluster's ident
        env = service["environment"]
        assert env["RAFTLOG_PEERS"] == settings.url
        assert env["RAFTLOG_IDENT"] == settings.ident
        # its own data volume at the data dir the cluster file gives it
        data_volume, mount = service["volumes"][0].split(":")
        assert data_volume in volumes and mount == str(settings.data_dir.parent)
        assert "./cluster.toml:/etc/raftlog/cluster.toml:ro" in service["volumes"]
        # graceful stop and restart policy
        assert service["stop_signal"] == "SIGTERM"
        assert service["stop_grace_period"] == "30s"
        assert service["restart"] == "unless-stopped"
        check = service["healthcheck"]["test"]
        assert check[:2] == ["CMD", "raftlog-admin"] and check[-2:] == ["config", "show"]


def test_healthcheck_command_exists_with_those_options() -> None:
    """The healthcheck calls a real CLI with options it accepts."""
    check = _compose()["services"]["peer1"]["healthcheck"]["test"]  # type: ignore[index]
    admin = Path(sys.executable).with_name(check[1])
    assert admin.is_file()
    shown = subprocess.run(
        [str(admin), *check[2:], "--help"], capture_output=True, text=True, check=False
    )
    assert shown.returncode == 0, shown.stderr


def test_dockerfile_runs_the_peer_unprivileged_with_a_data_volume() -> None:
    text = (DEPLOY / "docker" / "Dockerfile").read_text()
    uncommented = "\n".join(
        line for line in text.splitlines() if not line.lstrip().startswith("#")
    )
    lines = [line.strip() for line in uncommented.replace("\\\n", " ").splitlines() if line.strip()]
    directives = [line.split(None, 1) for line in lines if line.split(None, 1)[0].isupper()]
    by_name: dict[str, list[str]] = {}
    for name, *rest in directives:
        by_name.setdefault(name, []).append(rest[0] if rest else "")
    assert by_name["FROM"][0].startswith("python:3.11")
    assert by_name["USER"] == ["raftlog"]
    assert by_name["VOLUME"] == ['["/var/lib/raftlog"]']
    assert by_name["STOPSIGNAL"] == ["SIGTERM"]
    assert by_name["ENTRYPOINT"][0].startswith('["raftlog-peer"')
    # only the runtime dependencies: no extras in the image
    assert any("pip install --quiet ." in run for run in by_name["RUN"])
    assert not any("[spark" in run or "[dev" in run for run in by_name["RUN"])
    # the compiled twins are built (gcc only for that layer) and the build fails without them
    install = next(run for run in by_name["RUN"] if "pip install --quiet ." in run)
    assert "gcc" in install and "apt-get purge" in install and "COMPILED" in install
    assert "setup.py" in by_name["COPY"][0]


def _unit() -> configparser.ConfigParser:
    parser = configparser.ConfigParser(interpolation=None, strict=False)
    parser.optionxform = str  # type: ignore[assignment,method-assign]
    parser.read_string(UNIT.read_text().replace("\\\n", " "))
    return parser


def test_systemd_unit_stops_gracefully_restarts_and_runs_confined() -> None:
    service = _unit()["Service"]
    assert service["User"] == "raftlog"
    assert service["StateDirectory"] == "raftlog/%i"
    assert service["KillSignal"] == "SIGTERM"
    assert int(service["TimeoutStopSec"]) >= 10
    assert service["Restart"] == "on-failure"
    # neither a config error nor an out-of-range term on disk is retried
    assert service["RestartPreventExitStatus"] == "2 4"
    assert "kill -HUP $MAINPID" in service["ExecReload"]
    assert "--id %i" in service["ExecStart"] and "/var/lib/raftlog/%i" in service["ExecStart"]
    assert int(service["LimitNOFILE"]) >= 65536
    assert service["ProtectSystem"] == "strict"
    sysusers = (DEPLOY / "systemd" / "raftlog.sysusers.conf").read_text()
    assert any(line.startswith("u raftlog ") for line in sysusers.splitlines())


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="systemd not installed")
def test_systemd_unit_passes_systemd_analyze_verify(tmp_path: Path) -> None:
    """systemd's own check; it reports unknown settings on stderr (and still exits 0), so
    any output fails the test. ExecStart points at this venv's raftlog-peer."""
    peer = Path(sys.executable).with_name("raftlog-peer")
    text = UNIT.read_text().replace("/opt/raftlog/bin/raftlog-peer", str(peer))
    instance = tmp_path / "raftlog-peer@1.service"
    instance.write_text(text)
    result = subprocess.run(
        ["systemd-analyze", "verify", str(instance)], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0 and result.stderr.strip() == "", result.stderr
