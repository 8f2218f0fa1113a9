"""Real ``raftlog-peer`` processes on loopback for integration tests.

``PeerCluster`` writes a cluster TOML with ephemeral ports into a temp dir, starts one
subprocess per peer (stdout/stderr to ``<dir>/<id>.log``), and guarantees that every process
it started is gone when the context exits, whatever the test did. Waiting is always on a
condition with a deadline (``wait_for``), never a fixed sleep.

It talks to peers with a tiny blocking probe (``probe``) built on the project's codec, so it
does not depend on the client library it is used to test.
"""

from __future__ import annotations

import os
import random
import resource
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import pytest
import zmq

from integration.secure_setup import SecureSetup
from raftlog import sockets
from raftlog.rpc.messages import (
    ConfigUpdate,
    EntriesStatus,
    Request,
    RequestConfig,
    RequestConfigResponse,
    RequestEntries,
    RequestEntriesResponse,
    RequestLogInfo,
    RequestLogInfoResponse,
    RequestUpdate,
    RequestUpdateResponse,
    Response,
    UpdateStatus,
)
from raftlog.rpc.request_encoders import encode_request
from raftlog.rpc.response_decoders import decode_response
from raftlog.security.settings import CurveClient

PEER_BIN = Path(sys.executable).with_name("raftlog-peer")
T = TypeVar("T")


def _port_range() -> tuple[int, int]:
    """Where test ports come from: the 12,000 ports just below the kernel's ephemeral range
    (``ip_local_port_range``), or ``(0, 0)`` where there is no room below it."""
    try:
        low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        low = 32768  # Linux's default; elsewhere a guess the bind check below makes safe
    start = max(1024, low - 12_000)
    return (start, low) if low - start >= 4_000 else (0, 0)


_PORTS = _port_range()
_next_port = random.randrange(*_PORTS) if _PORTS[1] else 0
"""The next candidate (a random start: two pytest processes on one host rarely overlap)."""


def free_ports(n: int) -> list[int]:
    """``n`` distinct loopback ports that were free a moment ago.

    Why not bind to port 0: the kernel hands out the same ephemeral range to ``connect()``
    as source ports, and a port is released before the peer (or the fault proxy) that gets
    it binds it. A fault cluster once got peer 1's private bind port handed out again as
    peer 3's advertised one, and peer 1 never started (``Address already in use``, the CI
    run of 2026-11-26). Ports below that range are never a connection's source port, and
    a cursor walks them in turn, so a port comes back only after some 12,000 others."""
    global _next_port
    lo, hi = _PORTS
    if not hi:
        return _ephemeral_ports(n)
    ports: list[int] = []
    if n == 0:
        return ports
    for _ in range(hi - lo):
        port, _next_port = _next_port, lo + (_next_port + 1 - lo) % (hi - lo)
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe_socket:
            try:
                probe_socket.bind(("127.0.0.1", port))
            except OSError:  # taken, or in TIME_WAIT: the next one
                continue
        ports.append(port)
        if len(ports) == n:
            return ports
    raise RuntimeError(f"no {n} free loopback ports in {lo}-{hi - 1}")


def _ephemeral_ports(n: int) -> list[int]:
    """``n`` distinct ports the kernel picks (bind to 0, all held until each is chosen)."""
    socks = []
    try:
        for _ in range(n):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def wait_for(
    what: str, check: Callable[[], T | None], timeout: float = 20.0, interval: float = 0.02
) -> T:
    """Poll ``check`` until it returns something truthy; fail with ``what`` after ``timeout``."""
    deadline = time.monotonic() + timeout
    last_error: Exception | None = None
    while time.monotonic() < deadline:
        try:
            value = check()
        except Exception as exc:  # a peer mid-restart may refuse; keep polling
            last_error = exc
            value = None
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(
        f"timed out after {timeout}s waiting for {what} (last error: {last_error})"
    )


_CONTEXT = zmq.Context.instance()


def probe(
    url: str,
    ident: str,
    message: Request,
    *,
    timeout: float = 1.0,
    collect: int = 1,
    curve: CurveClient | None = None,
) -> list[Response]:
    """Send one request on a fresh DEALER and return up to ``collect`` responses (fewer on
    timeout; RequestUpdate collects until its final answer). ``curve`` talks CURVE."""
    sock = sockets.client_dealer(_CONTEXT, url, curve=curve)
    try:
        rid = None if isinstance(message, RequestUpdate | ConfigUpdate) else b"\x01"
        frames = encode_request(message, ident=ident.encode(), id=rid)
        sock.send_multipart(frames)
        out: list[Response] = []
        deadline = time.monotonic() + timeout
        while len(out) < collect:
            left = deadline - time.monotonic()
            if left <= 0 or not sock.poll(int(left * 1000) + 1):
                break
            _, response = decode_response(frames[1], sock.recv_multipart())
            out.append(response)
            if isinstance(response, RequestUpdateResponse):
                if response.status != UpdateStatus.ACCEPTED:
                    break  # final answer
                deadline = time.monotonic() + timeout  # "accepted" restarts the wait
        return out
    finally:
        sock.close(linger=0)


def _nofile_setter(limit: int) -> Callable[[], None]:
    """Run in the child before exec: lowering both limits needs no privilege."""

    def set_limit() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (limit, limit))

    return set_limit


@dataclass
class PeerProcess:
    id: str
    url: str
    pub_url: str
    data_dir: Path
    log_path: Path
    process: subprocess.Popen[bytes] | None = None
    bind_url: str | None = None
    """Where the peer binds its ROUTER if not at ``url`` (e.g. behind a fault proxy)."""
    env: dict[str, str] = field(default_factory=dict)
    """Extra environment of the next start (e.g. ``RAFTLOG_FAILPOINTS``)."""
    http_url: str | None = None
    kafka_url: str | None = None
    """The peer's Kafka listener (``kafka=True`` on the cluster), e.g. ``tcp://127.0.0.1:N``."""
    nofile: int | None = None
    """``RLIMIT_NOFILE`` of the next start, soft and hard: a peer raises its soft limit to the
    hard one at start (docs/operations.md §11), so only a hard limit bounds it."""

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None


class PeerCluster:
    """A cluster of ``raftlog-peer`` processes (use as a context manager)."""

    def __init__(
        self,
        directory: Path,
        ids: Sequence[str] = ("1", "2", "3"),
        *,
        ident: str = "raftlog-test",
        raft: dict[str, Any] | None = None,
        extra_peers: Iterable[tuple[str, str]] = (),
        ports: Sequence[int] | None = None,
        security: SecureSetup | None = None,
        http: bool = False,
        kafka: bool = False,
        extra_toml: Sequence[str] = (),
    ) -> None:
        """``ports`` optionally fixes the ``2 * len(ids)`` ports to use (router, pub for each
        peer in turn) instead of free ephemeral ones picked here; ``security`` runs the
        cluster with CURVE (probes then use its admin key); ``http`` gives every peer an
        ``http_url`` on a free port (the monitoring listener), ``kafka`` a ``kafka_url``;
        ``extra_toml`` lines are appended to the file (e.g. a ``[kafka]`` table)."""
        self.directory = directory
        self.ident = ident
        self.security = security
        self.curve = security.admin if security is not None else None
        ports = list(ports) if ports is not None else free_ports(2 * len(ids))
        if len(ports) != 2 * len(ids):
            raise ValueError(f"need {2 * len(ids)} ports, got {len(ports)}")
        self.peers: dict[str, PeerProcess] = {}
        for n, peer_id in enumerate(ids):
            self.peers[peer_id] = PeerProcess(
                peer_id,
                f"tcp://127.0.0.1:{ports[2 * n]}",
                f"tcp://127.0.0.1:{ports[2 * n + 1]}",
                directory / "data" / peer_id,
                directory / f"{peer_id}.log",
            )
        if http:
            for peer, port in zip(self.peers.values(), free_ports(len(ids)), strict=True):
                peer.http_url = f"http://127.0.0.1:{port}"
        if kafka:
            for peer, port in zip(self.peers.values(), free_ports(len(ids)), strict=True):
                peer.kafka_url = f"tcp://127.0.0.1:{port}"
        self._extra_toml = list(extra_toml)
        self._outsiders: set[str] = set()
        self.config_path = directory / "cluster.toml"
        self._raft = dict(raft or {})
        self._extra = [(peer_id, url, free_ports(1)[0]) for peer_id, url in extra_peers]
        self.write_config()

    def write_config(self) -> None:
        """(Re)write the cluster file, e.g. after setting ``bind_url`` on peers."""
        lines = ["[cluster]", f'ident = "{self.ident}"', f'data_dir = "{self.directory / "data"}"']
        lines.append("[raft]")
        for key, value in self._raft.items():
            lines.append(f"{key} = {_toml(value)}")
        if self.security is not None:
            lines += self.security.toml_lines()
        for peer in self.peers.values():
            if peer.id in self._outsiders:
                continue
            lines += ["[[peers]]", f'id = "{peer.id}"', f'url = "{peer.url}"']
            lines.append(f'pub_url = "{peer.pub_url}"')
            if self.security is not None:
                lines.append(f'key = "{self.security.peer_key(peer.id)}"')
            if peer.bind_url is not None:
                lines.append(f'bind = "{peer.bind_url}"')
            if peer.http_url is not None:
                lines.append(f'http_url = "{peer.http_url}"')
            if peer.kafka_url is not None:
                lines.append(f'kafka_url = "{peer.kafka_url}"')
        for peer_id, url, pub_port in self._extra:
            lines += ["[[peers]]", f'id = "{peer_id}"', f'url = "{url}"']
            lines.append(f'pub_url = "{url.rsplit(":", 1)[0]}:{pub_port}"')
        lines += self._extra_toml
        self.config_path.write_text("\n".join(lines) + "\n")

    # -- processes -------------------------------------------------------------------------
    @property
    def urls(self) -> list[str]:
        return [p.url for p in self.peers.values()]

    def pids(self) -> list[int]:
        """The process ids of the peers started so far (the benches read their CPU)."""
        return [p.process.pid for p in self.peers.values() if p.process is not None]

    def start(self, *ids: str, extra_args: Sequence[str] = ()) -> None:
        for peer_id in ids or tuple(self.peers):
            peer = self.peers[peer_id]
            if peer.running:
                continue
            log = open(peer.log_path, "ab")  # noqa: SIM115 -- handed to the child
            env = {**os.environ, "RAFTLOG_LOG_FORMAT": "json", **peer.env}
            args = list(extra_args)
            if peer_id in self._outsiders:
                args = ["--url", peer.url, "--pub-url", peer.pub_url, *args]
                if peer.bind_url is not None:
                    args = ["--bind", peer.bind_url, *args]
            peer.process = subprocess.Popen(
                [str(PEER_BIN), "-c", str(self.config_path), "--id", peer_id, *args],
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                # only setrlimit runs in the child between fork and exec: no lock is taken
                preexec_fn=None if peer.nofile is None else _nofile_setter(peer.nofile),  # noqa: PLW1509
            )
            log.close()

    def add_outsider(self, peer_id: str, *, port: int | None = None) -> PeerProcess:
        """A peer that is *not* in the cluster file (it starts in CLIENT state with
        ``--url``/``--pub-url``); ``start(peer_id)`` runs it, ``config_update`` adds it.
        ``port`` fixes its advertised ROUTER port (set ``bind_url`` to bind elsewhere)."""
        free_port, pub = free_ports(2)
        peer = PeerProcess(
            peer_id,
            f"tcp://127.0.0.1:{port or free_port}",
            f"tcp://127.0.0.1:{pub}",
            self.directory / "data" / peer_id,
            self.directory / f"{peer_id}.log",
        )
        self.peers[peer_id] = peer
        self._outsiders.add(peer_id)
        return peer

    def kill(self, peer_id: str) -> None:
        """SIGKILL: no clean shutdown, only what was fsynced survives."""
        peer = self.peers[peer_id]
        if peer.process is not None:
            peer.process.kill()
            peer.process.wait(10)
            peer.process = None

    def terminate(self, peer_id: str, timeout: float = 10.0) -> int:
        peer = self.peers[peer_id]
        assert peer.process is not None
        peer.process.send_signal(signal.SIGTERM)
        try:
            code = peer.process.wait(timeout)
        except subprocess.TimeoutExpired:
            peer.process.kill()
            peer.process.wait(10)
            raise
        peer.process = None
        return code

    def stop(self) -> None:
        for peer in self.peers.values():
            if peer.process is not None and peer.process.poll() is None:
                peer.process.send_signal(signal.SIGTERM)
        for peer in self.peers.values():
            if peer.process is not None:
                try:
                    peer.process.wait(10)
                except subprocess.TimeoutExpired:
                    peer.process.kill()
                    peer.process.wait(10)
                peer.process = None

    def __enter__(self) -> PeerCluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def compact_all(self, timeout: float = 60.0) -> str:
        """``raftlog-admin compact`` on every peer (raises if it fails); what each peer
        answered (e.g. "compacted to 49900"), joined with "; "."""
        done = subprocess.run(
            [
                str(PEER_BIN.with_name("raftlog-admin")),
                "--config",
                str(self.config_path),
                "--timeout",
                str(timeout),
                "compact",
            ],
            capture_output=True,
            text=True,
            check=True,
        )
        return "; ".join(line.split("\t")[-1] for line in done.stdout.strip().splitlines())

    # -- observations ----------------------------------------------------------------------
    def config_of(self, peer_id: str) -> RequestConfigResponse | None:
        got = probe(
            self.peers[peer_id].url, self.ident, RequestConfig(), timeout=0.5, curve=self.curve
        )
        return got[0] if got and isinstance(got[0], RequestConfigResponse) else None

    def log_info(self, peer_id: str) -> RequestLogInfoResponse | None:
        got = probe(
            self.peers[peer_id].url, self.ident, RequestLogInfo(), timeout=0.5, curve=self.curve
        )
        return got[0] if got and isinstance(got[0], RequestLogInfoResponse) else None

    def leader(self) -> str | None:
        """The id of a running peer that says it leads, if any."""
        for peer in self.peers.values():
            if peer.running:
                cfg = self.config_of(peer.id)
                if cfg is not None and cfg.is_leader:
                    return peer.id
        return None

    def wait_leader(self, timeout: float = 20.0, exclude: str | None = None) -> str:
        return wait_for(
            "a leader",
            lambda: (lid := self.leader()) is not None and lid != exclude and lid,
            timeout,
        )

    def wait_stable_leader(self, timeout: float = 30.0) -> str:
        """The leader's id once every running peer names the same leader and it says it
        leads (a freshly started cluster may still change leaders right after its first
        election)."""

        def agreed() -> str | None:
            views = [self.config_of(p.id) for p in self.peers.values() if p.running]
            leaders = {v.leader_id if v is not None else None for v in views}
            if len(leaders) != 1 or None in leaders:
                return None
            leader = leaders.pop()
            return leader if any(v is not None and v.is_leader for v in views) else None

        return wait_for("all peers to agree on a leader", agreed, timeout)

    def read_all(self, peer_id: str, prev_index: int = 0) -> list[tuple[int, bytes]]:
        """Every committed entry after ``prev_index`` as ``(index, serialized entry)``, read
        from leader ``peer_id`` with RequestEntries (acknowledging each batch)."""
        sock = sockets.client_dealer(
            _CONTEXT, self.peers[peer_id].url, curve=self.curve
        )
        out: list[tuple[int, bytes]] = []
        try:
            frames = encode_request(
                RequestEntries(prev_index), ident=self.ident.encode(), id=b"\x07"
            )
            sock.send_multipart(frames)
            while True:
                if not sock.poll(5000):
                    raise AssertionError("RequestEntries stream stalled")
                _, resp = decode_response(frames[1], sock.recv_multipart())
                assert isinstance(resp, RequestEntriesResponse)
                assert resp.status in (EntriesStatus.LAST, EntriesStatus.MORE), resp
                assert resp.last_index is not None
                first = resp.last_index - len(resp.entries) + 1
                out += [(first + n, e.to_bytes()) for n, e in enumerate(resp.entries)]
                if resp.status == EntriesStatus.LAST:
                    return out
                ack = RequestEntries(resp.last_index)
                sock.send_multipart(encode_request(ack, ident=self.ident.encode(), id=b"\x07"))
        finally:
            sock.close(linger=0)


C = TypeVar("C", bound=PeerCluster)


def module_cluster(start: Callable[[Path], C], name: str) -> Any:
    """A module-scoped pytest fixture: one cluster ``start(directory)`` returns running,
    shared by the module's tests (each uses its own topics, keys and groups), stopped after
    the last of them. ``name`` names its temp dir. Usage: ``cluster = module_cluster(...)``."""

    @pytest.fixture(scope="module")
    def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[C]:
        running = start(tmp_path_factory.mktemp(name))
        try:
            yield running
        finally:
            running.stop()

    return cluster


def _toml(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return '"null"'
    if isinstance(value, str):
        return f'"{value}"'
    return str(value)
