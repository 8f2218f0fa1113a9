"""HTTPS on a secure cluster's HTTP listener (issue #25 finding 7): what ``make run-secure``
relies on. ``raftlog-admin keys init`` on (a copy of) ``cluster-configs/local-3-secure.toml``
makes a local CA, the peers' certificate and a token and prints a curl line; a real secure
peer then serves ``https://`` with that certificate, and its monitoring endpoints want the
token (on main an ``https://`` http_url was rejected and ``/metrics`` answered anyone)."""

from __future__ import annotations

import json
import shutil
import socket
import ssl
import tomllib
import urllib.error
import urllib.request
from pathlib import Path

from integration.cluster import PeerCluster, wait_for
from integration.secure_setup import SecureSetup
from raftlog.cli.admin_keys import HTTP_TOKEN_NAME, init_cluster_keys
from raftlog.security import http_tls

ROOT = Path(__file__).resolve().parents[3]


def test_keys_init_makes_the_ca_the_certificate_and_a_token_once(tmp_path: Path) -> None:
    configs = tmp_path / "cluster-configs"
    configs.mkdir()
    config = configs / "local-3-secure.toml"
    shutil.copy(ROOT / "cluster-configs" / "local-3-secure.toml", config)
    lines = init_cluster_keys(config)
    keys_dir = tmp_path / "keys"
    assert (keys_dir / "http-ca.crt").exists() and (keys_dir / "http" / "peer.crt").exists()
    assert ((keys_dir / "http" / "peer.key").stat().st_mode & 0o777) == 0o600
    token = (keys_dir / f"{HTTP_TOKEN_NAME}.token").read_text().strip()
    clients = tomllib.loads((keys_dir / "clients.toml").read_text())["clients"]
    assert [c["name"] for c in clients] == ["admin", HTTP_TOKEN_NAME]
    curl = next(line for line in lines if "curl" in line)
    assert "--cacert" in curl and "https://127.0.0.1:8059/metrics" in curl
    context = ssl.create_default_context(cafile=keys_dir / "http-ca.crt")
    assert context.get_ca_certs()[0]["subject"]  # a loadable CA
    again = init_cluster_keys(config)
    assert all(line.startswith(("kept", "try:")) for line in again), again
    assert (keys_dir / f"{HTTP_TOKEN_NAME}.token").read_text().strip() == token


class HttpsCluster(PeerCluster):
    """One secure peer whose listener serves HTTPS with a certificate of a local CA."""

    def __init__(self, directory: Path, secure: SecureSetup) -> None:
        super().__init__(directory, ids=("1",), http=True, security=secure)
        peer = self.peers["1"]
        assert peer.http_url is not None
        peer.http_url = peer.http_url.replace("http://", "https://")
        self.cert = secure.keys_dir / "http" / "peer.crt"
        self.key = secure.keys_dir / "http" / "peer.key"
        http_tls.ensure_server_cert(secure.keys_dir, self.cert, self.key, ["127.0.0.1"])
        self.token_file, _ = http_tls.ensure_token(secure.keys_dir, secure.clients_file, "mon")
        self.write_config()

    def write_config(self) -> None:
        super().write_config()
        if hasattr(self, "cert"):
            with self.config_path.open("a") as f:
                f.write(f'[http]\ntls_cert = "{self.cert}"\ntls_key = "{self.key}"\n')


def test_a_secure_peer_serves_https_and_wants_the_token(tmp_path: Path) -> None:
    secure = SecureSetup(tmp_path / "secure", peer_ids=("1",))
    with HttpsCluster(tmp_path, secure) as cluster:
        cluster.start()
        cluster.wait_leader()
        base = cluster.peers["1"].http_url
        assert base is not None and base.startswith("https://")
        trust = ssl.create_default_context(cafile=secure.keys_dir / "http-ca.crt")
        token = cluster.token_file.read_text().strip()

        def get(path: str, with_token: bool) -> tuple[int, str]:
            request = urllib.request.Request(base + path)
            if with_token:
                request.add_header("Authorization", f"Bearer {token}")
            try:
                with urllib.request.urlopen(request, timeout=5, context=trust) as answer:
                    return answer.status, answer.read().decode()
            except urllib.error.HTTPError as exc:
                return exc.code, exc.read().decode()

        wait_for("HTTPS /healthz", lambda: get("/healthz", False)[0] == 200)
        status, body = get("/metrics", False)
        assert status == 401 and "raftlog_" not in body
        status, body = get("/metrics", True)
        assert status == 200 and "raftlog_commit_index" in body
        status, body = get("/v1/namespaces", True)
        assert status == 200 and "default" in json.dumps(json.loads(body))
        # plain HTTP to the HTTPS port gets no answer an HTTP client could take for one
        host, port = base.removeprefix("https://").rsplit(":", 1)
        with socket.create_connection((host, int(port)), timeout=5) as plain:
            plain.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
            try:
                answer = plain.recv(4096)
            except ConnectionResetError:
                answer = b""
        assert not answer.startswith(b"HTTP/1.1 200")
