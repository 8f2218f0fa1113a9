"""A CURVE cluster of real peers: who gets in, who gets what, and what the wire shows."""

from __future__ import annotations

import asyncio
import contextlib
import re
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import zmq

from integration.cluster import PEER_BIN, PeerCluster, free_ports, probe, wait_for
from integration.peer.updates import new_request_id, update
from integration.secure_setup import ClientSpec, SecureSetup
from raftlog import sockets
from raftlog.client import RaftClient, Subscriber
from raftlog.client.dealer import AUTH_REQUIRED
from raftlog.errors import AccessDeniedError, AuthenticationError
from raftlog.rpc.denied import access_denied_reason
from raftlog.rpc.messages import (
    ConfigUpdate,
    Peer,
    Request,
    RequestLogInfo,
    RequestLogInfoResponse,
    RequestUpdate,
    RequestVote,
)
from raftlog.rpc.request_encoders import encode_request
from raftlog.security.settings import CurveClient
from raftlog.topics.client import TopicClient

CLIENTS = [
    ClientSpec("admin", "admin"),
    ClientSpec("writer", "writer"),
    ClientSpec("reader", "reader"),
    ClientSpec("billing", "writer", publish=["billing.*"], read=["billing.*"]),
]
_CTX = zmq.Context.instance()


@pytest.fixture(scope="module")
def secure(tmp_path_factory: pytest.TempPathFactory) -> SecureSetup:
    """The keys of the module's shared cluster (a test that changes the allowlist gets its
    own: ``revocable``)."""
    return SecureSetup(tmp_path_factory.mktemp("secure"), clients=list(CLIENTS))


@contextlib.contextmanager
def _running(secure: SecureSetup) -> Iterator[PeerCluster]:
    with PeerCluster(secure.directory, security=secure) as c:
        c.start()
        c.wait_stable_leader()
        yield c


@pytest.fixture(scope="module")
def cluster(secure: SecureSetup) -> Iterator[PeerCluster]:
    """One CURVE cluster for the module's tests: they read, publish to their own topics and
    probe with keys, and leave its keys and membership as they found them."""
    with _running(secure) as c:
        yield c


@pytest.fixture
def revocable(tmp_path: Path) -> Iterator[tuple[PeerCluster, SecureSetup]]:
    """A cluster of its own for a test that rewrites the allowlist."""
    secure = SecureSetup(tmp_path, clients=list(CLIENTS))
    with _running(secure) as c:
        yield c, secure


def raw_exchange(
    url: str, ident: str, message: Request, curve: CurveClient | None, timeout: float = 2.0
) -> list[bytes] | None:
    """Send one request; the first answer's frames (msgid first), or None if silence."""
    sock = sockets.client_dealer(_CTX, url, curve=curve)
    try:
        rid = None if isinstance(message, RequestUpdate | ConfigUpdate) else b"\x01"
        sock.send_multipart(encode_request(message, ident=ident.encode(), id=rid))
        if not sock.poll(int(timeout * 1000)):
            return None
        return sock.recv_multipart()
    finally:
        sock.close(linger=0)


def term_of(cluster: PeerCluster, peer_id: str) -> int:
    info = cluster.log_info(peer_id)
    assert isinstance(info, RequestLogInfoResponse)
    return info.term


def test_secure_cluster_elects_and_commits_for_an_admin(cluster: PeerCluster) -> None:
    index = update(cluster, b"secret payload")
    leader = cluster.wait_leader()
    assert (index, b"secret payload") in [
        (i, e[-len(b"secret payload") :]) for i, e in cluster.read_all(leader)
    ]


def test_plaintext_and_unlisted_clients_get_nothing_and_the_cluster_keeps_serving(
    cluster: PeerCluster, secure: SecureSetup
) -> None:
    url = cluster.peers[cluster.wait_leader()].url
    assert raw_exchange(url, cluster.ident, RequestLogInfo(), curve=None) is None
    outsider = secure.client("outsider")
    assert raw_exchange(url, cluster.ident, RequestLogInfo(), curve=outsider) is None
    update(cluster, b"still serving")
    logs = "".join(p.log_path.read_text() for p in cluster.peers.values())
    assert '"zap_refused"' in logs


def test_roles_refuse_with_a_typed_answer(cluster: PeerCluster, secure: SecureSetup) -> None:
    url = cluster.peers[cluster.wait_leader()].url
    reader, writer = secure.client("reader"), secure.client("writer")

    answer = raw_exchange(url, cluster.ident, RequestLogInfo(), curve=reader)
    assert answer is not None and access_denied_reason(answer) is None

    answer = raw_exchange(url, cluster.ident, RequestUpdate(new_request_id(), b"x"), reader)
    assert answer is not None
    assert "needs role writer" in (access_denied_reason(answer) or "")

    change = ConfigUpdate(new_request_id(), (Peer("9", "tcp://127.0.0.1:9"),))
    answer = raw_exchange(url, cluster.ident, change, writer)
    assert answer is not None
    assert "needs role admin" in (access_denied_reason(answer) or "")

    got = probe(url, cluster.ident, RequestUpdate(new_request_id(), b"w"), collect=8,
                curve=writer)
    assert got, "a writer may publish"


def test_no_client_or_other_member_can_campaign_under_a_members_id(
    cluster: PeerCluster, secure: SecureSetup
) -> None:
    leader = cluster.wait_stable_leader()
    follower = next(p for p in cluster.peers if p != leader)
    impostor = next(p for p in cluster.peers if p not in (leader, follower))
    before = term_of(cluster, follower)
    forged = RequestVote(candidate_id=leader, term=before + 1000, last_log_index=10**6,
                         last_log_term=before + 999)
    for curve, refusal in (
        (secure.admin, "admin is not a member peer"),
        (secure.client(SecureSetup.peer_key(impostor)), f"may not speak for peer '{leader}'"),
    ):
        answer = raw_exchange(cluster.peers[follower].url, cluster.ident, forged, curve)
        assert answer is not None
        assert refusal in (access_denied_reason(answer) or "")
    assert term_of(cluster, follower) == before
    assert cluster.wait_stable_leader() == leader


def test_sighup_revokes_a_key_also_on_an_open_connection(
    revocable: tuple[PeerCluster, SecureSetup],
) -> None:
    cluster, secure = revocable
    url = cluster.peers[cluster.wait_leader()].url
    sock = sockets.client_dealer(_CTX, url, curve=secure.client("writer"))
    try:
        def ask() -> list[bytes]:
            sock.send_multipart(encode_request(RequestLogInfo(), ident=cluster.ident.encode(),
                                               id=b"\x01"))
            assert sock.poll(3000), "no answer"
            return sock.recv_multipart()

        assert access_denied_reason(ask()) is None
        secure.write_clients([c for c in CLIENTS if c.name != "writer"])
        for peer in cluster.peers.values():
            assert peer.process is not None
            peer.process.send_signal(signal.SIGHUP)
        wait_for("the revocation to take effect", lambda: access_denied_reason(ask()))
        assert all(p.running for p in cluster.peers.values()), "SIGHUP must not stop a peer"
    finally:
        sock.close(linger=0)


class TapProxy:
    """A TCP forwarder that records every byte it carries (both directions)."""

    def __init__(self, target_port: int) -> None:
        self.port = free_ports(1)[0]
        self.captured = bytearray()
        self._target = target_port
        self._lock = threading.Lock()
        self._server = socket.create_server(("127.0.0.1", self.port))
        self._stop = False
        self._threads = [threading.Thread(target=self._accept, daemon=True)]
        self._threads[0].start()

    def _accept(self) -> None:
        self._server.settimeout(0.2)
        while not self._stop:
            try:
                conn, _ = self._server.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            try:
                upstream = socket.create_connection(("127.0.0.1", self._target))
            except OSError:  # the peer is not up yet: its clients reconnect
                conn.close()
                continue
            for a, b in ((conn, upstream), (upstream, conn)):
                t = threading.Thread(target=self._pump, args=(a, b), daemon=True)
                t.start()
                self._threads.append(t)

    def _pump(self, src: socket.socket, dst: socket.socket) -> None:
        src.settimeout(0.2)
        try:
            while not self._stop:
                try:
                    data = src.recv(65536)
                except TimeoutError:
                    continue
                if not data:
                    break
                with self._lock:
                    self.captured += data
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        self._stop = True
        self._server.close()
        for t in self._threads:
            t.join(timeout=2)


@pytest.mark.parametrize("encrypted", [True, False], ids=["curve", "plaintext-control"])
def test_traffic_between_peers_carries_no_plaintext(tmp_path: Path, encrypted: bool) -> None:
    secure = SecureSetup(tmp_path, clients=list(CLIENTS)) if encrypted else None
    cluster = PeerCluster(tmp_path, security=secure)
    target = cluster.peers["3"]
    real_port = int(target.url.rsplit(":", 1)[1])
    tap = TapProxy(real_port)
    # everyone reaches peer 3 (peers and clients alike) through the tap
    text = cluster.config_path.read_text().replace(
        f'url = "{target.url}"', f'url = "tcp://127.0.0.1:{tap.port}"\nbind = "{target.url}"'
    )
    cluster.config_path.write_text(text)
    target.url = f"tcp://127.0.0.1:{tap.port}"
    marker = b"TOP-SECRET-" + new_request_id().hex().encode()
    try:
        with cluster:
            cluster.start()
            cluster.wait_stable_leader()
            last = max(update(cluster, marker) for _ in range(3))

            def peer3_has_them() -> bool:
                info = cluster.log_info("3")  # peer 3 holds them: they crossed the tap
                return info is not None and info.last_index >= last

            wait_for("peer 3 to have the entries", peer3_has_them)
    finally:
        tap.close()
    assert len(tap.captured) > 1000, "the tap saw the cluster's traffic"
    assert (marker in tap.captured) is not encrypted


# -- raftlog's own clients against the secure cluster ----------------------------------------
async def test_clients_with_an_allowed_key_publish_subscribe_and_use_topics(
    cluster: PeerCluster, secure: SecureSetup
) -> None:
    async with RaftClient(cluster.urls, cluster.ident, curve=secure.admin) as client:
        index = await client.request_update(b"through CURVE")
        async with Subscriber(client, from_index=index - 1) as sub:
            got = await asyncio.wait_for(anext(aiter(sub)), 10)
            assert got.index == index and got.entry.data == b"through CURVE"
        async with TopicClient(client) as topics:
            await topics.create_topic("orders")
            rid = await topics.publish("orders", b"o-1")
            page = await topics.read("orders", from_index=rid.index)
            assert [r.record.value for r in page.records] == [b"o-1"]


@pytest.mark.parametrize("who", ["outsider", "plaintext"])
async def test_a_client_without_an_allowed_key_fails_fast_with_authentication_failed(
    cluster: PeerCluster, secure: SecureSetup, who: str
) -> None:
    curve = secure.client("outsider") if who == "outsider" else None
    why = "authentication failed" if curve else re.escape(AUTH_REQUIRED)
    started = time.monotonic()
    async with RaftClient(cluster.urls, cluster.ident, curve=curve, timeout=20) as client:
        with pytest.raises(AuthenticationError, match=why):
            await client.request_update(b"nope")
    assert time.monotonic() - started < 10, "fails on the handshake, not on the timeout"


async def test_a_reader_key_gets_access_denied_not_a_timeout(
    cluster: PeerCluster, secure: SecureSetup
) -> None:
    async with RaftClient(cluster.urls, cluster.ident, curve=secure.client("reader")) as client:
        await client.request_config()  # reading is fine
        with pytest.raises(AccessDeniedError, match="needs role writer"):
            await client.request_update(b"no")


async def test_a_reader_key_may_plan_a_parallel_read_with_topic_counts(
    cluster: PeerCluster, secure: SecureSetup
) -> None:
    """Regression (#26): ``TC`` was missing from the permission table and needed admin, so
    a reader-role Spark job could not plan on a secure cluster."""
    admin = RaftClient(cluster.urls, cluster.ident, curve=secure.admin)
    async with admin as client, TopicClient(client) as topics:
        await topics.create_topic("planned", exist_ok=True)
        rid = await topics.publish("planned", b"p-1")
    reader = RaftClient(cluster.urls, cluster.ident, curve=secure.client("reader"))
    async with reader as client, TopicClient(client) as topics:
        counts = await topics.record_counts(1, rid.index, step=rid.index, topics=["planned"])
        assert sum(counts.records) >= 1


def test_admin_cli_uses_the_cluster_files_key_and_refuses_an_outsider(
    cluster: PeerCluster, secure: SecureSetup
) -> None:
    admin = [str(PEER_BIN.with_name("raftlog-admin")), "--config", str(cluster.config_path)]
    ok = subprocess.run(
        [*admin, "config", "show"], capture_output=True, text=True, timeout=60, check=False
    )
    assert ok.returncode == 0, ok.stderr
    started = time.monotonic()
    bad = subprocess.run(
        [*admin, "--auth-key", "outsider", "config", "show"],
        capture_output=True,
        check=False,
        text=True,
        timeout=60,
    )
    assert bad.returncode == 1, bad.stderr
    assert "authentication failed" in bad.stderr and bad.stderr.count("\n") == 1
    assert time.monotonic() - started < 8


def test_a_relative_auth_key_path_means_the_current_directory(
    cluster: PeerCluster, secure: SecureSetup
) -> None:
    """``--auth-key keys/admin.key_secret`` typed in the directory that holds ``keys/`` is
    that file, not ``keys_dir/keys/admin.key_secret`` (issue #33 item 4)."""
    relative = secure.keys_dir.relative_to(secure.directory) / "admin.key_secret"
    ok = subprocess.run(
        [str(PEER_BIN.with_name("raftlog-admin")), "--config", str(cluster.config_path),
         "--auth-key", str(relative), "config", "show"],
        capture_output=True, text=True, timeout=60, check=False, cwd=secure.directory,
    )
    assert ok.returncode == 0, ok.stderr


async def test_topic_acls_allow_and_deny_by_topic(
    cluster: PeerCluster, secure: SecureSetup
) -> None:
    async with RaftClient(cluster.urls, cluster.ident, curve=secure.admin) as admin, TopicClient(
        admin
    ) as topics:
        for name in ("billing.eu", "hr"):
            await topics.create_topic(name)
    async with RaftClient(
        cluster.urls, cluster.ident, curve=secure.client("billing")
    ) as client, TopicClient(client) as billing:
        rid = await billing.publish("billing.eu", b"invoice-1")
        page = await billing.read("billing.eu", from_index=rid.index)
        assert [r.record.value for r in page.records] == [b"invoice-1"]
        with pytest.raises(AccessDeniedError, match="may not publish to topic 'hr'"):
            await billing.publish("hr", b"salary")
        with pytest.raises(AccessDeniedError, match="may not read topic 'hr'"):
            await billing.read("hr")
        with pytest.raises(AccessDeniedError, match="needs role admin"):
            await billing.create_topic("billing.us")
        with pytest.raises(AccessDeniedError, match="use topic reads"):
            async for _ in client.request_entries(0):
                break


def test_the_admin_cli_without_curve_is_told_authentication_is_required(
    cluster: PeerCluster,
) -> None:
    """Issue #33 item 3: a plaintext raftlog-admin against the secure cluster said
    'unavailable ... unreachable x19' after 13.8 s."""
    started = time.monotonic()
    plain = subprocess.run(
        [str(PEER_BIN.with_name("raftlog-admin")), "--peers", ",".join(cluster.urls),
         "--ident", cluster.ident, "config", "show"],
        capture_output=True, text=True, timeout=60, check=False,
    )
    assert plain.returncode == 1, plain.stderr
    assert "authentication required (this cluster uses CURVE)" in plain.stderr
    assert plain.stderr.count("\n") == 1
    assert time.monotonic() - started < 10, "the handshake decides, not the timeout"
