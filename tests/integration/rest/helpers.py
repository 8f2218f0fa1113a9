"""A REST test cluster (real peers with HTTP listeners and a ``[rest]`` table) and a tiny
blocking HTTP client on the standard library, so the tests depend on nothing they test."""

from __future__ import annotations

import http.client
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from integration.cluster import PeerCluster, wait_for
from integration.secure_setup import SecureSetup

REST_TABLE = ["[rest]", 'namespaces = ["default", "billing"]', "max_body_bytes = 65536",
              "max_wait_ms = 5000", "request_timeout_ms = 4000"]


class RestCluster(PeerCluster):
    """A ``PeerCluster`` with HTTP listeners and a ``[rest]`` table."""

    def __init__(self, directory: Path, *, security: SecureSetup | None = None) -> None:
        super().__init__(directory, ident="raftlog-rest-test", http=True, security=security)

    def write_config(self) -> None:
        super().write_config()
        with self.config_path.open("a") as f:
            f.write("\n".join(REST_TABLE) + "\n")

    def http_url(self, peer_id: str) -> str:
        url = self.peers[peer_id].http_url
        assert url is not None
        return url

    def follower(self) -> str:
        leader = self.wait_leader()
        return next(p for p in self.peers if p != leader)


def started(directory: Path, *, security: SecureSetup | None = None) -> RestCluster:
    cluster = RestCluster(directory, security=security)
    try:
        cluster.start()
        leader = cluster.wait_stable_leader()
        for peer_id in cluster.peers:  # every listener up, and the leader known to it
            wait_for(f"REST on peer {peer_id}",
                     lambda p=peer_id: call(cluster.http_url(p), "GET", "/v1/namespaces",
                                            token=None if security is None else "admin-token"
                                            ).status == 200)
        del leader
    except BaseException:
        cluster.stop()
        raise
    return cluster


@dataclass
class Answer:
    status: int
    body: Any
    headers: dict[str, str]
    raw: bytes


def call(
    base: str,
    method: str,
    path: str,
    body: Any = None,
    *,
    raw: bytes | None = None,
    chunks: list[bytes] | None = None,
    token: str | None = None,
    headers: dict[str, str] | None = None,
    timeout: float = 15.0,
) -> Answer:
    """One HTTP request; ``body`` is sent as JSON, ``raw`` as is, ``chunks`` chunked."""
    parts = urlsplit(base)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=timeout)
    try:
        sent = raw if raw is not None else (None if body is None else json.dumps(body).encode())
        head = {"Content-Type": "application/json"} if sent is not None else {}
        if token is not None:
            head["Authorization"] = f"Bearer {token}"
        head.update(headers or {})
        if chunks is not None:  # no Content-Length: Transfer-Encoding: chunked
            conn.request(method, path, body=iter(chunks), headers=head, encode_chunked=True)
        else:
            conn.request(method, path, body=sent, headers=head)
        resp = conn.getresponse()
        data = resp.read()
        try:
            parsed = json.loads(data) if data else None
        except ValueError:
            parsed = None
        return Answer(resp.status, parsed, {k.lower(): v for k, v in resp.getheaders()}, data)
    finally:
        conn.close()
