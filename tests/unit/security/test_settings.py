"""The [security] table of a cluster file, for peers and clients, and `keys init`."""

from __future__ import annotations

from pathlib import Path

import pytest

from raftlog.cli.admin_keys import init_cluster_keys
from raftlog.config import load_cluster_file, load_peer_config
from raftlog.errors import ConfigError
from raftlog.security.settings import client_security

SECURE = """
[cluster]
ident = "t"
[security]
curve = true
keys_dir = "keys"
server_key = "cluster"
clients = "keys/clients.toml"
client_key = "ops"
[[peers]]
id = "1"
url = "tcp://127.0.0.1:7001"
pub_url = "tcp://127.0.0.1:7002"
key = "peer-1"
[[peers]]
id = "2"
url = "tcp://127.0.0.1:7003"
pub_url = "tcp://127.0.0.1:7004"
key = "peer-2"
"""


@pytest.fixture
def cluster_file(tmp_path: Path) -> Path:
    path = tmp_path / "cluster.toml"
    path.write_text(SECURE)
    lines = init_cluster_keys(path)
    assert sum(line.startswith("created") for line in lines) == 5  # 4 keys + allowlist
    assert all(line.startswith("kept") for line in init_cluster_keys(path))  # idempotent
    return path


def test_a_peer_gets_the_server_pair_its_own_pair_and_every_members_key(
    cluster_file: Path,
) -> None:
    settings = load_peer_config(cluster_file, "1")
    sec = settings.security
    assert sec is not None
    assert set(sec.peer_keys) == {"1", "2"}
    assert sec.client.public == sec.peer_keys["1"]
    assert sec.client.server_public == sec.server.public
    policy = sec.load_policy()
    assert {p.name for p in policy.principals.values()} == {"peer 1", "peer 2", "ops"}


def test_a_client_gets_its_pair_and_the_server_public_key(cluster_file: Path) -> None:
    doc = load_cluster_file(cluster_file)
    curve = client_security(doc, str(cluster_file), cluster_file.parent)
    assert curve is not None and len(curve.secret) == 40
    assert client_security(doc, "f", cluster_file.parent, key="peer-2") != curve


def test_plaintext_is_the_default(tmp_path: Path) -> None:
    path = tmp_path / "c.toml"
    path.write_text(SECURE.replace("curve = true", "curve = false"))
    assert load_peer_config(path, "1").security is None
    assert client_security(load_cluster_file(path), "c", tmp_path) is None


@pytest.mark.parametrize(
    ("edit", "error"),
    [
        (('key = "peer-2"\n', ""), "peer 2 needs a key"),
        (('server_key = "cluster"\n', ""), "needs server_key"),
        (("curve = true", "curve = 1"), "curve must be true or false"),
        (("curve = true", "curve = true\ncolour = 1"), "unknown option"),
        (('key = "peer-2"', 'key = "nobody"'), "no key 'nobody'"),
    ],
)
def test_bad_security_tables_fail_before_anything_starts(
    cluster_file: Path, edit: tuple[str, str], error: str
) -> None:
    cluster_file.write_text(SECURE.replace(*edit))
    with pytest.raises(ConfigError, match=error):
        load_peer_config(cluster_file, "1")


def test_a_peer_without_its_secret_cannot_start(cluster_file: Path) -> None:
    (cluster_file.parent / "keys" / "peer-1.key_secret").unlink()
    with pytest.raises(ConfigError, match="no secret key"):
        load_peer_config(cluster_file, "1")
