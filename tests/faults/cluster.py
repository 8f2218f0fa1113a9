"""``FaultCluster``: real ``raftlog-peer`` processes behind the fault proxy, plus every fault.

It reuses ``integration.cluster.PeerCluster`` for the processes and adds:

* process faults: ``kill`` (SIGKILL) + ``restart``, ``kill_all``, ``pause``/``resume``
  (SIGSTOP/SIGCONT: a stale leader that wakes up later);
* network faults through ``net`` (``faults.network.ProxyNetwork``): partitions between chosen
  peers, one-way links, delay/jitter and random loss per directed link;
* disk faults: ``slow_disk`` (the storage failpoint ``before_sync=sleep(ms)``, from the peer's
  next start), ``small_disk`` + ``fill_disk``/``free_disk`` (a tmpfs of a few MiB as the
  peer's data dir: needs root, skipped otherwise);
* ``cpu_hog``: a busy process pinned to one core beside the peers;
* observations: ``elections`` (``became_leader`` events in the peers' JSON logs), ``status``.

Everything started here is stopped by ``close`` (use it as a context manager): paused peers
are resumed first so they can stop, hogs are killed, the proxy stops, tmpfs mounts go.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from integration.cluster import PeerCluster, PeerProcess, free_ports, probe, wait_for

from faults.lazyfs.mount import LazyMount, require_fuse
from faults.network import ProxyNetwork
from raftlog.rpc.messages import RequestLogInfo, RequestLogInfoResponse

IDENT = "raftlog-faults"

DEFAULT_RAFT: dict[str, Any] = {"topic_auto_create": True}
"""Options of every fault cluster (the defaults otherwise: faults must meet real timeouts)."""


class FaultCluster:
    """A proxied cluster (see module docstring). ``peers`` is the underlying PeerCluster."""

    def __init__(
        self,
        directory: Path,
        ids: Sequence[str] = ("1", "2", "3"),
        *,
        raft: dict[str, Any] | None = None,
        seed: int = 0,
    ) -> None:
        if not Path("/proc/net/tcp").exists():
            pytest.skip("the fault proxy tells links apart through Linux /proc (not here)")
        self.directory = directory
        self.peers = PeerCluster(directory, ids, ident=IDENT, raft={**DEFAULT_RAFT, **(raft or {})})
        self.net = ProxyNetwork(str(self.peers.config_path), seed)
        self._paused: set[str] = set()
        self.extra_args: dict[str, list[str]] = {}
        """Command-line arguments per peer for every (re)start, e.g. ``--set`` options."""
        self._hogs: list[subprocess.Popen[bytes]] = []
        self._mounts: list[Path] = []
        self.lazy: dict[str, LazyMount] = {}
        """Lazy file systems under the peers' data dirs (``lazy_disks``), by peer id."""
        try:
            for peer in self.peers.peers.values():
                self._proxy(peer)
            self.peers.write_config()
        except BaseException:
            self.close()
            raise

    def _proxy(self, peer: PeerProcess) -> None:
        """Bind the peer privately; its advertised port becomes the proxy's listener."""
        bind_port = free_ports(1)[0]
        peer.bind_url = f"tcp://127.0.0.1:{bind_port}"
        self.net.listen(peer.id, int(peer.url.rsplit(":", 1)[1]), bind_port)

    # -- lifecycle -------------------------------------------------------------------------
    def __enter__(self) -> FaultCluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        for peer_id in list(self._paused):
            self.resume(peer_id)
        for hog in self._hogs:
            hog.kill()
            hog.wait(10)
        self._hogs.clear()
        self.peers.stop()
        self.net.close()
        for point in self._mounts:
            subprocess.run(["umount", "-l", str(point)], check=False, capture_output=True)
        self._mounts.clear()
        for mount in self.lazy.values():
            mount.close()
        self.lazy.clear()

    @property
    def ids(self) -> list[str]:
        return list(self.peers.peers)

    @property
    def urls(self) -> list[str]:
        """Advertised URLs (through the proxy): what clients use."""
        return self.peers.urls

    def direct_url(self, peer_id: str) -> str:
        """Where the peer really listens (bypasses every network fault)."""
        peer = self.peers.peers[peer_id]
        return peer.bind_url or peer.url

    def start(self, *ids: str) -> None:
        for peer_id in ids or tuple(self.ids):
            self.peers.start(peer_id, extra_args=self.extra_args.get(peer_id, ()))

    def running(self, peer_id: str) -> bool:
        return self.peers.peers[peer_id].running

    # -- process faults --------------------------------------------------------------------
    def kill(self, peer_id: str) -> None:
        """SIGKILL (a paused peer is killed as it is)."""
        self._paused.discard(peer_id)
        self.peers.kill(peer_id)

    def restart(self, peer_id: str) -> None:
        self.start(peer_id)

    def add_outsider(self, peer_id: str) -> PeerProcess:
        """A new peer outside the configuration (CLIENT state until added), proxied too."""
        port = free_ports(1)[0]
        peer = self.peers.add_outsider(peer_id, port=port)
        self._proxy(peer)
        return peer

    def kill_all(self) -> None:
        """Every peer at once (as close together as signals go): a power cut."""
        for peer in self.peers.peers.values():
            if peer.process is not None:
                peer.process.send_signal(signal.SIGKILL)
        for peer_id in self.ids:
            self.kill(peer_id)

    def pause(self, peer_id: str) -> None:
        process = self.peers.peers[peer_id].process
        assert process is not None, f"peer {peer_id} is not running"
        process.send_signal(signal.SIGSTOP)
        self._paused.add(peer_id)

    def resume(self, peer_id: str) -> None:
        process = self.peers.peers[peer_id].process
        if process is not None:
            process.send_signal(signal.SIGCONT)
        self._paused.discard(peer_id)

    def exit_code(self, peer_id: str) -> int | None:
        process = self.peers.peers[peer_id].process
        return None if process is None else process.poll()

    # -- disk faults -----------------------------------------------------------------------
    def lazy_disks(self, ids: Sequence[str] | None = None) -> None:
        """Put each peer's data dir on a lazy file system (before it starts): what it writes
        without an fsync is lost by ``power_cut``. Skips the test where FUSE cannot work."""
        require_fuse()
        for peer_id in ids or self.ids:
            self.lazy[peer_id] = LazyMount(self.peers.peers[peer_id].data_dir)

    def power_cut(self, ids: Sequence[str], torn_seed: int | None = None) -> dict[str, int]:
        """Cut the power of ``ids`` at once: SIGKILL them together, then drop everything
        their disks had not made durable (each needs a lazy disk). Returns the bytes and
        directory entries dropped, summed over the disks."""
        for peer_id in ids:
            self._paused.discard(peer_id)
            process = self.peers.peers[peer_id].process
            if process is not None:
                process.send_signal(signal.SIGKILL)
        for peer_id in ids:
            self.peers.kill(peer_id)  # reaps: no syscall of the dead peer is still in flight
        dropped = {"bytes": 0, "entries": 0}
        for n, peer_id in enumerate(ids):
            seed = None if torn_seed is None else torn_seed + n
            got = self.lazy[peer_id].power_cut(seed)["dropped"]
            dropped["bytes"] += got["bytes"]
            dropped["entries"] += got["entries"]
        return dropped

    def slow_disk(self, peer_id: str, ms: int) -> None:
        """Every synced write of ``peer_id`` sleeps ``ms`` first (from its next start)."""
        self.set_failpoints(peer_id, f"before_sync=sleep({ms})")

    def set_failpoints(self, peer_id: str, spec: str | None) -> None:
        """``RAFTLOG_FAILPOINTS`` of ``peer_id`` from its next start (None: none)."""
        env = self.peers.peers[peer_id].env
        env.pop("RAFTLOG_FAILPOINTS_UNSAFE", None)
        if spec:
            env["RAFTLOG_FAILPOINTS"] = spec
            if "=skip" in spec:  # a negative control's bug switch: consent is explicit here
                env["RAFTLOG_FAILPOINTS_UNSAFE"] = "lose-acknowledged-writes"
        else:
            env.pop("RAFTLOG_FAILPOINTS", None)

    def small_disk(self, peer_id: str, size_mb: int) -> Path:
        """Put ``peer_id``'s data dir on a tmpfs of ``size_mb`` MiB (before it starts)."""
        if os.geteuid() != 0:
            pytest.skip("a small disk (tmpfs mount) needs root")
        point = self.peers.peers[peer_id].data_dir
        point.mkdir(parents=True, exist_ok=True)
        mounted = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={size_mb}m", "tmpfs", str(point)],
            capture_output=True,
            check=False,
        )
        if mounted.returncode != 0:
            pytest.skip(f"cannot mount a tmpfs: {mounted.stderr.decode().strip()}")
        self._mounts.append(point)
        return point

    def fill_disk(self, peer_id: str, leave_bytes: int = 64 * 1024) -> None:
        """Fill ``peer_id``'s small disk but ``leave_bytes``."""
        point = self.peers.peers[peer_id].data_dir
        stat = os.statvfs(point)
        size = max(0, stat.f_bavail * stat.f_frsize - leave_bytes)
        with contextlib.suppress(OSError), open(point / "filler", "wb") as f:
            chunk = b"\0" * (1 << 20)
            while size > 0:
                size -= f.write(chunk[: min(size, len(chunk))])

    def free_disk(self, peer_id: str) -> None:
        (self.peers.peers[peer_id].data_dir / "filler").unlink(missing_ok=True)

    # -- CPU -------------------------------------------------------------------------------
    def cpu_hog(self, core: int | None = 0) -> subprocess.Popen[bytes]:
        """A busy loop beside the peers, pinned to ``core`` (None: anywhere)."""
        # Spins until killed, or until its parent (the test) is gone: never left behind.
        code = (
            f"import os\nparent = {os.getpid()}\n"
            "while os.getppid() == parent:\n    for _ in range(200_000): pass\n"
        )
        if core is not None:
            code = f"import os; os.sched_setaffinity(0, {{{core}}})\n{code}"
        hog = subprocess.Popen([sys.executable, "-c", code])
        self._hogs.append(hog)
        return hog

    def stop_hogs(self) -> None:
        for hog in self._hogs:
            hog.kill()
            hog.wait(10)
        self._hogs.clear()

    # -- observations ----------------------------------------------------------------------
    def events(self, name: str) -> list[dict[str, Any]]:
        """Every ``name`` event in the peers' JSON logs (each with its ``peer``)."""
        out: list[dict[str, Any]] = []
        for peer in self.peers.peers.values():
            if not peer.log_path.exists():
                continue
            with open(peer.log_path, "rb") as f:
                for line in f:
                    if name.encode() not in line:
                        continue
                    with contextlib.suppress(ValueError):
                        event = json.loads(line)
                        if event.get("event") == name:
                            out.append({**event, "peer": peer.id})
        return out

    def elections(self) -> int:
        """Leaders elected so far, over all peers and restarts."""
        return len(self.events("became_leader"))

    def leader(self, exclude: str | None = None) -> str | None:
        """The running peer (other than ``exclude``) that says it leads in the highest term.
        A stale leader cut off by a partition may still say it leads, in an older term."""
        infos = self.log_infos()
        leaders = [
            (info.term, peer_id)
            for peer_id, info in infos.items()
            if info is not None and info.is_leader and peer_id != exclude
        ]
        return max(leaders)[1] if leaders else None

    def wait_leader(self, timeout: float = 30.0, exclude: str | None = None) -> str:
        return wait_for("a leader", lambda: self.leader(exclude), timeout)

    def log_infos(self) -> dict[str, RequestLogInfoResponse | None]:
        """Every running peer's RequestLogInfo (asked directly, past the proxy)."""
        out: dict[str, RequestLogInfoResponse | None] = {}
        for peer_id in self.ids:
            if not self.running(peer_id) or peer_id in self._paused:
                continue
            got = probe(self.direct_url(peer_id), IDENT, RequestLogInfo(), timeout=1.0)
            info = got[0] if got else None
            out[peer_id] = info if isinstance(info, RequestLogInfoResponse) else None
        return out

    def wait_converged(
        self,
        ids: Sequence[str] | None = None,
        timeout: float = 60.0,
        give_up: Callable[[], str | None] | None = None,
    ) -> int:
        """Wait until the running peers ``ids`` (default: all) report the same commit and
        applied index and one of them leads; returns that index. ``give_up`` may end the
        wait early with the reason it returns (an ``AssertionError`` saying the peers did
        not converge): a negative control that already sees why they never will need not
        wait out the timeout."""
        wanted = list(ids) if ids is not None else self.ids

        def same() -> tuple[int, str | None] | None:  # (commit, why gave up): never falsy
            reason = None if give_up is None else give_up()
            if reason is not None:
                return (0, reason)
            infos = self.log_infos()
            got = [infos.get(p) for p in wanted]
            if any(i is None for i in got):
                return None
            marks = {(i.commit_index, i.last_applied) for i in got if i is not None}
            leads = any(i is not None and i.is_leader for i in got)
            if len(marks) == 1 and leads:
                commit, applied = marks.pop()
                return (commit, None) if commit == applied else None
            return None

        commit, reason = wait_for(f"peers {wanted} to converge", same, timeout, interval=0.2)
        if reason is not None:
            raise AssertionError(f"gave up waiting for peers {wanted} to converge: {reason}")
        return commit


@contextlib.contextmanager
def fault_cluster(directory: Path, **kwargs: Any) -> Iterator[FaultCluster]:
    with FaultCluster(directory, **kwargs) as cluster:
        yield cluster
