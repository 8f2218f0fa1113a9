"""Helpers for interop tests that run raftlog peers next to the reference ``zmq-raft``.

Why a separate module: the reference harness (``reference.py``) knows nothing about raftlog, and
the raftlog harness (``integration.cluster``) knows nothing about Node.js. Tests that put both
in one cluster, or drive our peers with the reference's client classes, need a little glue:

* :class:`MixedCluster` — one peer list (ids, URLs, ident) built once and handed to both
  ``PeerCluster`` (our TOML) and ``ReferenceCluster`` (its JSON), with start / kill -9 /
  restart by id whatever software runs the peer;
* :func:`log_info_at` — RequestLogInfo against any URL (ours or the reference's);
* :func:`read_our_log` / :func:`read_reference_log` — every entry a peer has on disk, byte for
  byte, read with each implementation's own storage code, so replicas can be compared;
* :class:`BackgroundUpdater` — the reference ``ZmqRaftClient`` committing updates in a
  background Node.js process while a test kills peers.
"""

from __future__ import annotations

import contextlib
import json
import random
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

import pytest

_TESTS_DIR = Path(__file__).resolve().parents[1]
if str(_TESTS_DIR) not in sys.path:  # ``integration`` is a package under tests/
    sys.path.insert(0, str(_TESTS_DIR))

from integration.cluster import PeerCluster, probe, wait_for  # noqa: E402
from integration.peer.updates import update  # noqa: E402
from integration.secure_setup import SecureSetup  # noqa: E402
from reference import (  # noqa: E402
    ReferenceCluster,
    agreed_leader,
    probe_config,
    run_node_script,
    wait_for_leader,
)

from raftlog.entry import LogEntry  # noqa: E402
from raftlog.rpc.messages import RequestLogInfo, RequestLogInfoResponse  # noqa: E402
from raftlog.storage.rocks import open_storage  # noqa: E402

__all__ = [
    "BackgroundUpdater",
    "MixedCluster",
    "PeerCluster",
    "entry_bytes",
    "log_info_at",
    "processes_mentioning",
    "quiet_peer_cluster",
    "quiet_ports",
    "read_our_log",
    "read_reference_log",
    "SecureSetup",
    "update",
    "wait_for",
]


SLOW_REFERENCE_ELECTIONS = {"electionTimeoutMin": 1500, "electionTimeoutMax": 2000}
"""Reference election timeouts long enough that a raftlog peer wins the first election
(ours: 200-300 ms + 300 ms after start-up; these: 1500-2000 ms + 300 ms)."""


@pytest.fixture(autouse=True)
def no_leftover_processes(tmp_path: Path) -> Iterator[None]:
    """Every peer a test started (its config lives under tmp_path) is gone after it; autouse
    in each test module that imports it."""
    yield
    left = processes_mentioning(tmp_path)
    assert not left, f"processes left running: {left}"


def _ephemeral_range() -> tuple[int, int]:
    try:
        lo, hi = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
        return int(lo), int(hi)
    except (OSError, ValueError):
        return 32768, 60999


def quiet_ports(n: int) -> list[int]:
    """``n`` distinct loopback ports *below* the kernel's ephemeral range that are free now.

    Why not bind(0): those ports come from the ephemeral range, which every outgoing TCP
    connection on the machine draws its local port from. A peer that is down for a while (a
    late start, a kill -9 and restart) leaves its port unbound, and the other peers keep
    reconnecting to it every 50 ms; meanwhile any outgoing connection -- including one of
    those reconnects, which then connects to itself -- can take the port, and the restarted
    peer fails with "Address already in use" (seen on this machine). Ports below the range
    are only ever taken by explicit binds.
    """
    eph_lo, _ = _ephemeral_range()
    lo = max(1024, eph_lo - 12000)
    held: list[socket.socket] = []
    try:
        for port in random.sample(range(lo, eph_lo), min(eph_lo - lo, 400)):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                s.close()
                continue
            held.append(s)
            if len(held) == n:
                return [h.getsockname()[1] for h in held]
        raise RuntimeError(f"no {n} free ports in {lo}..{eph_lo - 1}")
    finally:
        for h in held:
            h.close()


def quiet_peer_cluster(
    directory: Path, ids: Sequence[str] = ("1", "2", "3"), **kwargs: Any
) -> PeerCluster:
    """A ``PeerCluster`` on :func:`quiet_ports` (router and pub port of every peer)."""
    return PeerCluster(directory, ids, ports=quiet_ports(2 * len(ids)), **kwargs)


def processes_mentioning(path: Path) -> list[str]:
    """Command lines of live processes that mention ``path`` (e.g. a test's tmp_path, which
    every peer started for that test has in its config path), for leak checks that are not
    confused by other people's clusters on the same machine."""
    needle = str(path).encode() + b"/"
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes()
            state = (proc / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if needle in cmdline and state != "Z":
            text = cmdline.replace(b"\0", b" ").decode(errors="replace")
            found.append(f"{proc.name}: {text}")
    return found


def log_info_at(url: str, ident: str, timeout: float = 0.5) -> RequestLogInfoResponse | None:
    """RequestLogInfo to one peer by URL (works for our peers and reference peers alike)."""
    got = probe(url, ident, RequestLogInfo(), timeout=timeout)
    return got[0] if got and isinstance(got[0], RequestLogInfoResponse) else None


def entry_bytes(e: Mapping[str, Any]) -> bytes:
    """Re-serialize an entry as decoded by the reference client (``js_read_log`` and
    ``js_subscribe`` results) into the wire layout of docs/protocol.md §4.1."""
    return LogEntry(
        bytes.fromhex(e["reqid"]), int(e["type"]), int(e["term"]), bytes.fromhex(e["data"])
    ).to_bytes()


def read_our_log(data_dir: Path) -> list[bytes]:
    """Every entry (index 1..last) in a raftlog peer's store, read-only (the peer may run)."""
    store, hard, snaps = open_storage(data_dir, read_only=True)
    try:
        assert store.first_index == 1, f"{data_dir}: log was compacted"
        return store.raw_entries(1, store.last_index + 1)
    finally:
        store.close()
        hard.close()
        snaps.close()


_JS_DUMP_FILELOG = r"""
(async () => {
  const path = require('path');
  const log = new raft.server.FileLog(path.join(P.dir, 'log'), path.join(P.dir, 'snap'), true);
  await log.ready();
  const entries = await log.getEntries(log.firstIndex, log.lastIndex);
  const out = {firstIndex: log.firstIndex, lastIndex: log.lastIndex,
               entries: entries.map((b) => hex(b))};
  await log.close();
  done(out);
})().catch(fail);
"""


def read_reference_log(data_dir: Path) -> list[bytes]:
    """Every entry (index 1..last) in a stopped reference peer's FileLog, read with the
    reference's own ``FileLog`` class (read-only)."""
    res = run_node_script(_JS_DUMP_FILELOG, params={"dir": str(data_dir)})
    assert res["firstIndex"] == 1, f"{data_dir}: log was compacted: {res['firstIndex']}"
    entries = [bytes.fromhex(h) for h in res["entries"]]
    assert len(entries) == res["lastIndex"], res["lastIndex"]
    return entries


T = TypeVar("T")
PeerState = tuple[int, int, int, int, str | None]
"""What RequestLogInfo reports: last index, commit index, applied index, term, leader."""


class MixedCluster:
    """A Raft cluster whose peers are run partly by raftlog and partly by the reference.

    The peer list (id → router URL, in configuration order ``ours`` then ``refs``) is built
    once, on :func:`quiet_ports`: our peers' ports go to ``PeerCluster`` (``ports=``), the
    reference peers' URLs go to it as ``extra_peers`` (peers in our TOML that we do not run),
    and the whole list goes to ``ReferenceCluster`` as ``peers=`` with ``run_ids=refs``.
    Both sides therefore see the same ids, URLs and ident. ``reference_options`` are merged
    into the reference peers' ``raft`` config (e.g. longer election timeouts so that a raftlog
    peer is the one that wins). Use it as a context manager; every process is stopped on exit.
    """

    def __init__(
        self,
        workdir: Path,
        ours: Sequence[str],
        refs: Sequence[str],
        *,
        ident: str = "raftlog-mixed",
        reference_options: Mapping[str, Any] | None = None,
    ) -> None:
        self.ident = ident
        self.ours = list(ours)
        self.refs = list(refs)
        ports = quiet_ports(2 * len(self.ours) + 2 * len(self.refs))
        ref_ports = ports[2 * len(self.ours) :]
        ref_urls = {pid: f"tcp://127.0.0.1:{ref_ports[2 * n]}" for n, pid in enumerate(self.refs)}
        ref_pubs = {
            pid: f"tcp://127.0.0.1:{ref_ports[2 * n + 1]}" for n, pid in enumerate(self.refs)
        }
        (workdir / "raftlog").mkdir(parents=True, exist_ok=True)
        self.raftlog = PeerCluster(
            workdir / "raftlog",
            self.ours,
            ident=ident,
            extra_peers=list(ref_urls.items()),
            ports=ports[: 2 * len(self.ours)],
        )
        self.urls: dict[str, str] = {pid: self.raftlog.peers[pid].url for pid in self.ours}
        self.urls.update(ref_urls)
        self.reference = ReferenceCluster(
            workdir / "reference",
            peers=self.urls,
            pub_urls=ref_pubs,
            run_ids=self.refs,
            ident=ident,
            options=reference_options,
        )

    @property
    def ids(self) -> list[str]:
        return list(self.urls)

    def kind(self, peer_id: str) -> str:
        return "raftlog" if peer_id in self.ours else "reference"

    # -- processes ---------------------------------------------------------------------------
    def start(self, *ids: str) -> None:
        for pid in ids or self.ids:
            if pid in self.ours:
                self.raftlog.start(pid)
            else:
                self.reference.start(pid)

    def kill(self, peer_id: str) -> None:
        """SIGKILL one peer, whichever implementation runs it."""
        if peer_id in self.ours:
            self.raftlog.kill(peer_id)
        else:
            self.reference.kill(peer_id)

    def is_running(self, peer_id: str) -> bool:
        if peer_id in self.ours:
            return self.raftlog.peers[peer_id].running
        return self.reference.is_running(peer_id)

    def check_alive(self) -> None:
        """Fail fast if a peer we started exited on its own."""
        self.reference.check_alive()
        for peer in self.raftlog.peers.values():
            if peer.process is not None and peer.process.poll() is not None:
                raise RuntimeError(
                    f"raftlog peer {peer.id!r} exited with status {peer.process.returncode}; "
                    f"log tail:\n{self.log_tail(peer.id)}"
                )

    def stop(self) -> None:
        try:
            self.raftlog.stop()
        finally:
            self.reference.stop()

    def __enter__(self) -> MixedCluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- observations ------------------------------------------------------------------------
    def wait_until(self, what: str, check: Callable[[], T | None], timeout: float) -> T:
        """Poll ``check`` until truthy; fail at once (with the log tail) if a peer process
        exits, instead of waiting out the deadline."""
        deadline = time.monotonic() + timeout
        while True:
            self.check_alive()
            value = check()
            if value:
                return value
            if time.monotonic() >= deadline:
                raise AssertionError(f"timed out after {timeout}s waiting for {what}")
            time.sleep(0.02)

    def wait_same_state(
        self, ids: Sequence[str], last: int, timeout: float = 15.0
    ) -> dict[str, PeerState]:
        """Wait until every peer in ``ids`` reports lastIndex == commitIndex == lastApplied
        >= ``last``, the same term and the same leader (RequestLogInfo); return what each
        reported."""
        seen: dict[str, PeerState] = {}

        def check() -> bool:
            seen.clear()
            for pid in ids:
                info = self.log_info(pid)
                if info is None:
                    return False
                seen[pid] = (
                    info.last_index,
                    info.commit_index,
                    info.last_applied,
                    info.term,
                    info.leader_id,
                )
            values = set(seen.values())
            if len(values) != 1:
                return False
            ((li, ci, la, _, leader),) = values
            return li == ci == la >= last and leader is not None

        try:
            self.wait_until(
                f"peers {list(ids)} to agree on a log of >= {last} entries", check, timeout
            )
        except AssertionError as exc:
            raise AssertionError(
                f"{exc}; last seen (last, commit, applied, term, leader): {seen}"
            ) from None
        return dict(seen)

    def wait_leader(self, timeout: float = 20.0, exclude: Sequence[str] = ()) -> str:
        """A leader acknowledged by a majority of the configured peers."""
        return wait_for_leader(
            self.urls,
            self.ident,
            timeout=timeout,
            exclude=exclude,
            cluster_size=len(self.urls),
            check=self.check_alive,
        )

    def leader_known_by(self, peer_id: str) -> str | None:
        reply = probe_config({peer_id: self.urls[peer_id]}, self.ident)[peer_id]
        return None if reply is None else reply.leader_id

    def agreed_leader(self) -> str | None:
        return agreed_leader(probe_config(self.urls, self.ident), len(self.urls))

    def log_info(self, peer_id: str) -> RequestLogInfoResponse | None:
        return log_info_at(self.urls[peer_id], self.ident)

    def log_infos(self) -> dict[str, RequestLogInfoResponse | None]:
        return {pid: self.log_info(pid) for pid in self.ids if self.is_running(pid)}

    def read_log_files(self, peer_id: str) -> list[bytes]:
        """The peer's whole log from its own storage (reference peers must be stopped)."""
        if peer_id in self.ours:
            return read_our_log(self.raftlog.peers[peer_id].data_dir)
        assert not self.reference.is_running(peer_id), "stop the reference peer first"
        return read_reference_log(self.reference.data_dir(peer_id))

    def log_tail(self, peer_id: str, lines: int = 40) -> str:
        if peer_id in self.ours:
            try:
                text = self.raftlog.peers[peer_id].log_path.read_text(errors="replace")
            except OSError:
                return ""
            return "\n".join(text.splitlines()[-lines:])
        return self.reference.log_tail(peer_id, lines)

    def describe(self) -> str:
        """Every peer's log tail, for failure output."""
        parts = []
        for pid in self.ids:
            parts.append(f"----- {self.kind(pid)} peer {pid} ({self.urls[pid]}) -----")
            parts.append(self.log_tail(pid))
        return "\n".join(parts)


# Commits updates with the reference ZmqRaftClient, ``P.workers`` loops in flight at once,
# until the file ``P.stopFile`` exists (or ``P.max`` updates were acknowledged). Each
# acknowledgement is appended to ``P.progressFile`` as one JSON line so that the test can watch
# progress while the script runs.
_JS_UPDATE_LOAD = r"""
const fs = require('fs');
(async () => {
  const client = newClient();
  const acked = [];
  let n = 0;
  const stopping = () => acked.length >= P.max || fs.existsSync(P.stopFile);
  const worker = async (w) => {
    while (!stopping()) {
      const reqid = genIdent('hex');
      const data = Buffer.from(`load-${w}-${n++}`);
      const t0 = Date.now();
      const index = await client.requestUpdate(reqid, data, P.rpcTimeout);
      const rec = {reqid, index, data: hex(data), ms: Date.now() - t0, at: Date.now()};
      acked.push(rec);
      fs.appendFileSync(P.progressFile, JSON.stringify(rec) + '\n');
    }
  };
  const workers = [];
  for (let w = 0; w < P.workers; ++w) workers.push(worker(w));
  await Promise.all(workers);
  client.close();
  done({acked});
})().catch(fail);
"""


class BackgroundUpdater:
    """The reference client committing updates in the background (a Node.js process run by a
    worker thread), observable while it runs through :meth:`progress`.

    Why a file and a thread: the test must kill peers *while* the reference client is in the
    middle of requests, so the script cannot be run to completion first; a progress file is
    the simplest channel that needs no parsing of a live pipe.
    """

    def __init__(
        self,
        workdir: Path,
        urls: Sequence[str],
        ident: str,
        *,
        workers: int = 4,
        max_updates: int = 100_000,
        rpc_timeout_ms: int = 30_000,
        timeout: float = 90.0,
    ) -> None:
        workdir.mkdir(parents=True, exist_ok=True)
        self.progress_file = workdir / "progress.jsonl"
        self.stop_file = workdir / "stop"
        self.progress_file.write_text("")
        self._params = {
            "urls": list(urls),
            "ident": ident,
            "workers": workers,
            "max": max_updates,
            "rpcTimeout": rpc_timeout_ms,
            "progressFile": str(self.progress_file),
            "stopFile": str(self.stop_file),
        }
        self._timeout = timeout
        self.result: dict[str, Any] | None = None
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="reference-updater", daemon=True)

    def _run(self) -> None:
        try:
            self.result = run_node_script(
                _JS_UPDATE_LOAD, params=self._params, timeout=self._timeout
            )
        except BaseException as exc:
            self.error = exc

    def start(self) -> BackgroundUpdater:
        self._thread.start()
        return self

    def progress(self) -> list[dict[str, Any]]:
        """Acknowledged updates so far (``reqid``, ``index``, ``data`` hex, ``ms``, ``at``)."""
        if self.error is not None:
            raise AssertionError(f"reference updater failed: {self.error}")
        lines = self.progress_file.read_text().splitlines()
        out = []
        for line in lines:
            with contextlib.suppress(json.JSONDecodeError):  # a line being written
                out.append(json.loads(line))
        return out

    def wait_acked(self, n: int, timeout: float = 20.0) -> list[dict[str, Any]]:
        return wait_for(
            f"{n} updates acknowledged", lambda: len(p := self.progress()) >= n and p, timeout
        )

    def finish(self, timeout: float = 40.0) -> dict[str, Any]:
        """Ask the script to stop after its in-flight updates and return its result."""
        self.stop_file.touch()
        self._thread.join(timeout)
        if self._thread.is_alive():
            raise AssertionError("reference updater did not stop")
        if self.error is not None:
            raise self.error
        assert self.result is not None
        return self.result

    def __enter__(self) -> BackgroundUpdater:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        # Whatever happened, make the script stop; run_node_script kills it on its timeout.
        self.stop_file.touch()
        self._thread.join(self._timeout + 5)
