"""Helpers that run the Node.js reference implementation (npm ``zmq-raft``) from pytest.

Why: raftlog claims wire compatibility with ``zmq-raft``; the only convincing proof is to
run the reference's own server and client code against ours. This module

* starts reference peers as subprocesses (:class:`ReferenceCluster`), alone or as part of a
  mixed cluster whose other peers are run by other software (e.g. raftlog),
* drives the reference client classes (``ZmqRaftClient``, ``ZmqRaftSubscriber``) through
  small Node.js programs (:func:`run_node_script` and the ``js_*`` builders), and
* probes any peer with a tiny pure-Python RequestConfig (:func:`probe_config`), so waiting for
  an election does not cost a Node.js start-up per poll.

The reference is installed into ``<repo>/.interop`` by ``install_reference.sh`` (see
``tests/interop/README.md`` for why the install needs special care on this machine).
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import IO, Any, NamedTuple

import msgpack
import zmq

REPO_ROOT = Path(__file__).resolve().parents[2]
if str(REPO_ROOT / "tests") not in sys.path:  # ``integration`` is a package under tests/
    sys.path.insert(0, str(REPO_ROOT / "tests"))

# the one test-port allocator: reference and raftlog clusters share a pytest process, so
# they share its cursor and never get a port the other was just given
from integration.cluster import free_ports  # noqa: E402

INTEROP_DIR = Path(os.environ.get("RAFTLOG_INTEROP", REPO_ROOT / ".interop"))
NODE_MODULES = INTEROP_DIR / "node_modules"
ZMQ_RAFT_BIN = NODE_MODULES / "zmq-raft" / "bin" / "zmq-raft.js"
INSTALL_SCRIPT = Path(__file__).with_name("install_reference.sh")

DEFAULT_IDENT = "raftlog-interop"

# RequestConfig message type (docs/protocol.md §10.1).
_REQUEST_CONFIG = b"^"


def _orphan_guard() -> list[str]:
    """Command prefix that makes Linux SIGKILL the child when the thread that started it dies.

    Why: context managers and atexit cover failing tests, Ctrl-C and pytest-timeout, but not a
    pytest process that is itself SIGKILLed; without this an orphaned reference peer would keep
    its ports and burn CPU forever. ``setpriv`` (util-linux) sets the parent-death signal and
    execs the command, which avoids an unsafe ``preexec_fn``. Empty where unavailable.
    """
    setpriv = shutil.which("setpriv")
    if sys.platform != "linux" or setpriv is None:
        return []
    return [setpriv, "--pdeathsig", "KILL", "--"]


_ORPHAN_GUARD_CMD = _orphan_guard()


def _guard() -> list[str]:
    # The parent-death signal fires when the *thread* that forked exits, so it is only safe
    # for children started from the main thread (e.g. not from asyncio.to_thread workers).
    if threading.current_thread() is threading.main_thread():
        return _ORPHAN_GUARD_CMD
    return []


def wait_until(
    predicate: Callable[[], Any], timeout: float, message: str, interval: float = 0.05
) -> Any:
    """Poll ``predicate`` until it returns a truthy value (returned) or ``timeout`` expires.

    Why: interop tests must wait on conditions, never on fixed sleeps, so they are both fast
    on a quiet machine and tolerant on a loaded one.
    """
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise TimeoutError(f"timed out after {timeout:.1f}s waiting for: {message}")
        time.sleep(interval)


# --------------------------------------------------------------------------------------------
# Pure-Python RequestConfig probe
# --------------------------------------------------------------------------------------------


class ConfigReply(NamedTuple):
    """A decoded RequestConfig response (docs/protocol.md §10.1)."""

    is_leader: bool
    leader_id: str | None
    peers: list[tuple[str, str]]


def _decode_config_reply(frames: Sequence[bytes]) -> ConfigReply:
    """Decode ``[id, bool is-leader, json leader-id, json peers]`` as the reference sends it."""
    if len(frames) < 4:
        raise ValueError(f"RequestConfig reply has {len(frames)} frames, expected 4")
    flag = frames[1]
    is_leader = len(flag) > 0 and flag[0] != 0
    leader_id = msgpack.unpackb(frames[2], raw=False)
    peers_raw = msgpack.unpackb(frames[3], raw=False)
    peers = [(str(p[0]), str(p[1])) for p in peers_raw]
    return ConfigReply(is_leader, None if leader_id is None else str(leader_id), peers)


def probe_config(
    urls: Mapping[str, str],
    ident: str | bytes,
    timeout: float = 0.3,
    stop_when: Callable[[Mapping[str, ConfigReply | None]], bool] | None = None,
    strict: bool = False,
) -> dict[str, ConfigReply | None]:
    """Send one RequestConfig to every peer in ``urls`` (id → url) in parallel.

    Why: waiting for an election by starting the Node.js client per poll costs ~100 ms of
    start-up each time; a DEALER speaking the three-frame request directly is instant and also
    works for peers that are not run by the reference. A peer that does not answer within
    ``timeout`` seconds (dead, still starting, wrong ident — the reference answers a wrong
    ident with silence) maps to ``None``. An undecodable reply maps to ``None`` too, or raises
    ``ValueError`` (naming the peer and the frames) with ``strict=True``, which is what a
    wire-compatibility test wants to see instead of a vague "no leader".
    ``stop_when`` is evaluated on the partial result after each reply; returning True stops
    waiting for the rest (so a dead peer does not delay a decision the others already allow).
    """
    ident_b = ident.encode() if isinstance(ident, str) else ident
    ctx = zmq.Context.instance()
    sockets: dict[zmq.Socket[bytes], str] = {}
    result: dict[str, ConfigReply | None] = dict.fromkeys(urls)
    poller = zmq.Poller()
    try:
        for peer_id, url in urls.items():
            s: zmq.Socket[bytes] = ctx.socket(zmq.DEALER)
            s.setsockopt(zmq.LINGER, 0)
            s.connect(url)
            # DEALER queues the message until the connection is up; no empty delimiter frame.
            s.send_multipart([b"\x01", _REQUEST_CONFIG, ident_b], copy=True)
            sockets[s] = peer_id
            poller.register(s, zmq.POLLIN)
        deadline = time.monotonic() + timeout
        pending = set(sockets)
        while pending:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            for s, _ev in poller.poll(remaining * 1000):
                frames = s.recv_multipart()
                pending.discard(s)
                poller.unregister(s)
                try:
                    result[sockets[s]] = _decode_config_reply(frames)
                except Exception as e:
                    if strict:
                        shown = [f.hex() for f in frames]
                        raise ValueError(
                            f"peer {sockets[s]!r} sent an undecodable RequestConfig reply "
                            f"{shown}: {e}"
                        ) from e
            if stop_when is not None and stop_when(result):
                break
    finally:
        for s in sockets:
            s.close(linger=0)
    return result


def agreed_leader(replies: Mapping[str, ConfigReply | None], cluster_size: int) -> str | None:
    """Return the leader id if one peer claims leadership and a majority acknowledges it.

    Why: a peer can call itself leader briefly while a newer term is already under way; a
    leader that a majority of the configured peers (itself included) names is the one clients
    will actually be routed to.
    """
    claimants = [pid for pid, r in replies.items() if r is not None and r.is_leader]
    if len(claimants) != 1:
        return None
    leader = claimants[0]
    votes = sum(1 for r in replies.values() if r is not None and r.leader_id == leader)
    return leader if votes >= cluster_size // 2 + 1 else None


def wait_for_leader(
    urls: Mapping[str, str],
    ident: str | bytes,
    timeout: float = 15.0,
    exclude: Iterable[str] = (),
    cluster_size: int | None = None,
    check: Callable[[], None] | None = None,
) -> str:
    """Poll ``urls`` with RequestConfig until a majority-acknowledged leader exists; return it.

    ``exclude`` lists ids that must not be the answer (e.g. a leader just killed, whose stale
    answer could otherwise be seen if it were still alive). ``check`` is called every round so
    a caller can fail fast (e.g. a peer process died) instead of waiting for the deadline.
    """
    size = cluster_size if cluster_size is not None else len(urls)
    excluded = set(exclude)
    deadline = time.monotonic() + timeout
    last: dict[str, ConfigReply | None] = {}
    while True:
        if check is not None:
            check()
        last = probe_config(
            urls,
            ident,
            timeout=0.25,
            stop_when=lambda r: agreed_leader(r, size) not in (None, *excluded),
            strict=True,
        )
        leader = agreed_leader(last, size)
        if leader is not None and leader not in excluded:
            return leader
        if time.monotonic() >= deadline:
            raise TimeoutError(f"no leader elected within {timeout:.1f}s; last replies: {last}")
        time.sleep(0.05)


# --------------------------------------------------------------------------------------------
# ReferenceCluster
# --------------------------------------------------------------------------------------------


@dataclass
class _Proc:
    popen: subprocess.Popen[bytes]
    log: IO[bytes]


_LIVE: set[ReferenceCluster] = set()
_LIVE_LOCK = threading.Lock()


@atexit.register
def _stop_leftovers() -> None:
    """Last-resort cleanup: never leave reference peers running after the interpreter exits."""
    with _LIVE_LOCK:
        clusters = list(_LIVE)
    for c in clusters:
        with contextlib.suppress(Exception):
            c.stop()


def _deep_merge(base: dict[str, Any], extra: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for k, v in extra.items():
        if isinstance(v, Mapping) and isinstance(out.get(k), dict):
            out[k] = _deep_merge(out[k], v)
        else:
            out[k] = v
    return out


class ReferenceCluster:
    """Run (some of) the peers of a Raft cluster with the reference server ``zmq-raft.js``.

    Why a class: interop tests need to start, SIGKILL and restart individual reference peers,
    build mixed clusters (the caller supplies the full peer list and asks for only a subset to
    run here, the rest being e.g. raftlog peers), and be sure that every process started is
    gone when the test ends, whatever happens. Use it as a context manager.

    ``peers`` maps peer id → router URL in configuration order (default: ids ``"1".."n"`` on
    free loopback ports). ``pub_urls`` maps id → BroadcastStateMachine PUB URL for the peers run
    here (generated when missing). ``run_ids`` are the ids this object runs (default: all).
    ``options`` are extra keys merged (deeply) into the ``raft`` namespace of every generated
    config, e.g. ``{"electionTimeoutMin": 300}``; see ``config/default.hjson`` in the package.
    ``env`` adds environment variables for the peer processes, e.g. ``{"DEBUG": "zmq-raft*"}``
    to get the reference's debug log in :meth:`log_path`.
    """

    def __init__(
        self,
        workdir: Path | str,
        n: int = 3,
        *,
        peers: Mapping[str, str] | Sequence[tuple[str, str]] | None = None,
        pub_urls: Mapping[str, str] | None = None,
        run_ids: Iterable[str] | None = None,
        ident: str = DEFAULT_IDENT,
        options: Mapping[str, Any] | None = None,
        env: Mapping[str, str] | None = None,
    ) -> None:
        self.workdir = Path(workdir)
        self.ident = ident
        if peers is None:
            ports = free_ports(n)
            peer_map = {str(i + 1): f"tcp://127.0.0.1:{p}" for i, p in enumerate(ports)}
        else:
            peer_map = dict(peers.items() if isinstance(peers, Mapping) else peers)
        if not peer_map:
            raise ValueError("a cluster needs at least one peer")
        self._peers: dict[str, str] = peer_map
        self.run_ids: list[str] = list(self._peers) if run_ids is None else list(run_ids)
        unknown = [i for i in self.run_ids if i not in self._peers]
        if unknown:
            raise ValueError(f"run_ids {unknown} are not in the peer list {list(self._peers)}")
        given_pubs = dict(pub_urls or {})
        missing = [i for i in self.run_ids if i not in given_pubs]
        for pid, port in zip(missing, free_ports(len(missing)), strict=True):
            given_pubs[pid] = f"tcp://127.0.0.1:{port}"
        self._pub_urls = given_pubs
        self._options = dict(options or {})
        self._env = dict(env or {})
        self._procs: dict[str, _Proc] = {}
        for pid in self.run_ids:
            self._write_config(pid)

    # ---- description ---------------------------------------------------------------------

    @property
    def urls(self) -> dict[str, str]:
        """Router URL of every peer in the configuration (id → url), in config order."""
        return dict(self._peers)

    @property
    def pub_urls(self) -> dict[str, str]:
        """BroadcastStateMachine PUB URL of every peer run here (id → url)."""
        return dict(self._pub_urls)

    @property
    def peers(self) -> list[tuple[str, str]]:
        """The configuration as ``[(id, url), ...]``, the shape RequestConfig returns."""
        return list(self._peers.items())

    @property
    def ids(self) -> list[str]:
        """All peer ids in configuration order."""
        return list(self._peers)

    def data_dir(self, peer_id: str) -> Path:
        """The ``raft.data.path`` of a peer run here (log, snapshot, raft.pers, state.pers)."""
        return self.workdir / f"peer-{peer_id}" / "data"

    def config_path(self, peer_id: str) -> Path:
        """The JSON config file passed to ``zmq-raft.js -c``."""
        return self.workdir / f"peer-{peer_id}" / "config.json"

    def log_path(self, peer_id: str) -> Path:
        """Where the peer's stdout and stderr go (appended across restarts)."""
        return self.workdir / f"peer-{peer_id}" / "peer.log"

    def log_tail(self, peer_id: str, lines: int = 40) -> str:
        """The last lines of a peer's log, for assertion messages."""
        try:
            text = self.log_path(peer_id).read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def config(self, peer_id: str) -> dict[str, Any]:
        """The generated configuration of a peer (as written to :meth:`config_path`)."""
        raft: dict[str, Any] = {
            "id": peer_id,
            "label": "raftlog interop",
            "secret": self.ident,
            "peers": [{"id": i, "url": u} for i, u in self._peers.items()],
            "data": {
                "path": str(self.data_dir(peer_id)),
                "appendIdToPath": False,
                "compact": {"watch": False},
            },
            "broadcast": {"url": self._pub_urls[peer_id]},
            "webmonitor": {"enable": False},
        }
        return {"raft": _deep_merge(raft, self._options)}

    def _write_config(self, peer_id: str) -> None:
        path = self.config_path(peer_id)
        path.parent.mkdir(parents=True, exist_ok=True)
        self.data_dir(peer_id).mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(self.config(peer_id), indent=2) + "\n")

    # ---- processes -----------------------------------------------------------------------

    def is_running(self, peer_id: str) -> bool:
        """True while this object has a live process for ``peer_id``."""
        proc = self._procs.get(peer_id)
        return proc is not None and proc.popen.poll() is None

    @property
    def running_ids(self) -> list[str]:
        """Ids of the peers whose processes are alive."""
        return [pid for pid in self.run_ids if self.is_running(pid)]

    def pid(self, peer_id: str) -> int:
        """OS process id of a running peer."""
        return self._procs[peer_id].popen.pid

    def start(self, peer_id: str) -> None:
        """Start (or restart after :meth:`kill`) the reference peer ``peer_id``."""
        if peer_id not in self.run_ids:
            raise ValueError(f"peer {peer_id!r} is not run by this cluster ({self.run_ids})")
        if self.is_running(peer_id):
            raise RuntimeError(f"peer {peer_id!r} is already running")
        self._reap(peer_id)
        if not ZMQ_RAFT_BIN.is_file():
            raise FileNotFoundError(
                f"{ZMQ_RAFT_BIN} is missing; run tests/interop/install_reference.sh"
            )
        log = self.log_path(peer_id).open("ab")
        env = {**os.environ, **self._env}
        cmd = [
            *_guard(),
            "node",
            str(ZMQ_RAFT_BIN),
            "-c",
            str(self.config_path(peer_id)),
            peer_id,
        ]
        try:
            popen = subprocess.Popen(
                cmd,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=str(self.workdir),
                env=env,
                start_new_session=True,  # a Ctrl-C in the terminal is handled by pytest only
            )
        except BaseException:
            log.close()
            raise
        self._procs[peer_id] = _Proc(popen, log)
        with _LIVE_LOCK:
            _LIVE.add(self)

    def start_all(self) -> None:
        """Start every peer of :attr:`run_ids` that is not running."""
        for pid in self.run_ids:
            if not self.is_running(pid):
                self.start(pid)

    def kill(self, peer_id: str) -> None:
        """SIGKILL a peer (a crash: no shutdown, no fsync beyond what it already did)."""
        proc = self._procs.get(peer_id)
        if proc is None:
            raise ValueError(f"peer {peer_id!r} was never started")
        if proc.popen.poll() is None:
            proc.popen.send_signal(signal.SIGKILL)
        proc.popen.wait()
        self._reap(peer_id)

    def terminate(self, peer_id: str, timeout: float = 5.0) -> int:
        """Stop a peer gracefully (SIGTERM, it closes its sockets); SIGKILL after ``timeout``."""
        proc = self._procs.get(peer_id)
        if proc is None:
            raise ValueError(f"peer {peer_id!r} was never started")
        if proc.popen.poll() is None:
            proc.popen.terminate()
            try:
                proc.popen.wait(timeout)
            except subprocess.TimeoutExpired:
                proc.popen.kill()
                proc.popen.wait()
        rc = proc.popen.returncode
        self._reap(peer_id)
        return rc

    def stop(self, timeout: float = 5.0) -> None:
        """Terminate all peers, wait up to ``timeout`` in total, SIGKILL leftovers."""
        for proc in self._procs.values():
            if proc.popen.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    proc.popen.terminate()
        deadline = time.monotonic() + timeout
        for proc in self._procs.values():
            try:
                proc.popen.wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    proc.popen.kill()
                proc.popen.wait()
        for pid in list(self._procs):
            self._reap(pid)
        with _LIVE_LOCK:
            _LIVE.discard(self)

    def _reap(self, peer_id: str) -> None:
        proc = self._procs.get(peer_id)
        if proc is not None and proc.popen.poll() is not None:
            proc.log.close()
            del self._procs[peer_id]

    def check_alive(self) -> None:
        """Raise if a peer started here has exited on its own (crash, bad config, port taken).

        Why: the reference exits (sometimes with status 0, e.g. on "RAFT INIT ERROR") instead
        of retrying, and a test waiting for an election would otherwise only see a timeout.
        """
        for pid, proc in self._procs.items():
            rc = proc.popen.poll()
            if rc is not None:
                raise RuntimeError(
                    f"reference peer {pid!r} exited with status {rc}; log tail:\n"
                    f"{self.log_tail(pid)}"
                )

    # ---- cluster state -------------------------------------------------------------------

    def probe(self, timeout: float = 0.3) -> dict[str, ConfigReply | None]:
        """RequestConfig every configured peer (including ones not run here)."""
        return probe_config(self._peers, self.ident, timeout)

    def wait_for_leader(self, timeout: float = 15.0, exclude: Iterable[str] = ()) -> str:
        """Wait until a majority-acknowledged leader exists and return its id.

        Probes every configured peer, so in a mixed cluster the leader may be a peer that is
        not run here. Fails fast if a peer run here dies.
        """
        return wait_for_leader(
            self._peers,
            self.ident,
            timeout=timeout,
            exclude=exclude,
            cluster_size=len(self._peers),
            check=self.check_alive,
        )

    # ---- context manager -----------------------------------------------------------------

    def __enter__(self) -> ReferenceCluster:
        try:
            self.start_all()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"ReferenceCluster(peers={self._peers}, running={self.running_ids})"


# --------------------------------------------------------------------------------------------
# Node.js scripts driving the reference client classes
# --------------------------------------------------------------------------------------------


class NodeScriptError(RuntimeError):
    """A Node.js helper script failed, timed out or printed no JSON result."""


# Prepended to every script run by run_node_script (unless prelude=False). It gives scripts
# `raft` (the zmq-raft package), `P` (the params object), `done(obj)` to print the result and
# exit, `fail(err)` and the helpers `hex(buf)` / `unhex(str)`.
JS_PRELUDE = r"""
"use strict";
const raft = require('zmq-raft');
const { ZmqRaftClient, ZmqRaftSubscriber } = raft.client;
const { genIdent } = raft.utils.id;
const P = process.env.RAFTLOG_INTEROP_PARAMS
  ? JSON.parse(require('fs').readFileSync(process.env.RAFTLOG_INTEROP_PARAMS, 'utf8')) : {};
const hex = (buf) => Buffer.from(buf).toString('hex');
const unhex = (s) => Buffer.from(s, 'hex');
function done(obj) {
  process.stdout.write('\n' + JSON.stringify(obj) + '\n', () => process.exit(0));
}
function fail(err) {
  process.stderr.write('interop script failed: ' + ((err && err.stack) || err) + '\n',
                       () => process.exit(1));
}
process.on('unhandledRejection', fail);
process.on('uncaughtException', fail);
function newClient(extra) {
  return new ZmqRaftClient(P.urls, Object.assign({secret: P.ident, lazy: false}, extra || {}));
}
"""


def run_node_script(
    script: str,
    *,
    params: Mapping[str, Any] | None = None,
    args: Sequence[str] = (),
    env: Mapping[str, str] | None = None,
    timeout: float = 30.0,
    prelude: bool = True,
) -> dict[str, Any]:
    """Run a small Node.js program against the installed reference and return its result.

    The program must print one JSON object as its **last** stdout line (use ``done(obj)`` from
    :data:`JS_PRELUDE`). ``params`` are written to a JSON file (named by an environment
    variable) and exposed as ``P`` (no string interpolation of values into code); ``args`` become
    ``process.argv.slice(2)``. ``NODE_PATH`` points at ``.interop/node_modules`` so
    ``require('zmq-raft')`` works from a temp file. Raises :class:`NodeScriptError` with the
    script's stderr on non-zero exit, timeout or a missing/invalid JSON line.

    Why a subprocess per call: the reference client is JavaScript; driving it directly is the
    only way to prove that *its* client logic (leader discovery, retries, pipelined
    RequestEntries, subscriber gap filling) works against our peers.
    """
    full = (JS_PRELUDE + "\n" + script) if prelude else script
    run_env = {**os.environ, **(env or {})}
    node_path = str(NODE_MODULES)
    if run_env.get("NODE_PATH"):
        node_path = node_path + os.pathsep + run_env["NODE_PATH"]
    run_env["NODE_PATH"] = node_path
    with tempfile.TemporaryDirectory(prefix="raftlog-node-") as tmp:
        path = Path(tmp) / "script.js"
        path.write_text(full)
        # A file, not the environment: params may be larger than one env string may be.
        params_path = Path(tmp) / "params.json"
        params_path.write_text(json.dumps(dict(params or {})))
        run_env["RAFTLOG_INTEROP_PARAMS"] = str(params_path)
        try:
            proc = subprocess.run(
                [*_guard(), "node", str(path), *args],
                stdin=subprocess.DEVNULL,
                capture_output=True,
                env=run_env,
                timeout=timeout,
                cwd=tmp,
                check=False,
            )
        except subprocess.TimeoutExpired as e:
            raise NodeScriptError(
                f"node script timed out after {timeout}s\n--- stderr ---\n"
                f"{_text(e.stderr)}\n--- stdout ---\n{_text(e.stdout)[-2000:]}"
            ) from None
    stdout, stderr = _text(proc.stdout), _text(proc.stderr)
    if proc.returncode != 0:
        raise NodeScriptError(
            f"node script exited with status {proc.returncode}\n--- stderr ---\n{stderr}"
            f"\n--- stdout ---\n{stdout[-2000:]}"
        )
    lines = [ln for ln in stdout.splitlines() if ln.strip()]
    try:
        result = json.loads(lines[-1])
    except (IndexError, json.JSONDecodeError):
        raise NodeScriptError(
            f"node script printed no JSON result\n--- stdout ---\n{stdout[-2000:]}"
            f"\n--- stderr ---\n{stderr}"
        ) from None
    if not isinstance(result, dict):
        raise NodeScriptError(f"node script result is not a JSON object: {result!r}")
    return result


def _text(b: bytes | str | None) -> str:
    if b is None:
        return ""
    return b if isinstance(b, str) else b.decode(errors="replace")


@dataclass(frozen=True)
class NodeJob:
    """A ready-made reference-client program plus its parameters; see :meth:`run`."""

    script: str
    params: dict[str, Any]
    timeout: float = 30.0

    def run(self, timeout: float | None = None) -> dict[str, Any]:
        """Run it with :func:`run_node_script` and return the parsed result."""
        return run_node_script(
            self.script,
            params=self.params,
            timeout=timeout if timeout is not None else self.timeout,
        )


def _base_params(urls: Mapping[str, str] | Sequence[str], ident: str) -> dict[str, Any]:
    url_list = list(urls.values()) if isinstance(urls, Mapping) else list(urls)
    return {"urls": url_list, "ident": ident}


_JS_CONFIG_AND_LOG_INFO = r"""
(async () => {
  const client = newClient();
  const cfg = await client.requestConfig(P.rpcTimeout);
  const info = await client.requestLogInfo(false, P.rpcTimeout);
  client.close();
  done({leaderId: cfg.leaderId, isLeader: cfg.isLeader, peers: cfg.peers, urls: cfg.urls,
        logInfo: info});
})().catch(fail);
"""


def js_config_and_log_info(
    urls: Mapping[str, str] | Sequence[str], ident: str, rpc_timeout_ms: int = 10000
) -> NodeJob:
    """``ZmqRaftClient.requestConfig`` then ``requestLogInfo(false)`` (both from the leader).

    Result: ``{leaderId, isLeader, peers: [[id,url]...], urls: {id:url}, logInfo: {isLeader,
    leaderId, currentTerm, firstIndex, lastApplied, commitIndex, lastIndex, snapshotSize,
    pruneIndex}}``.
    """
    params = _base_params(urls, ident) | {"rpcTimeout": rpc_timeout_ms}
    return NodeJob(_JS_CONFIG_AND_LOG_INFO, params)


_JS_UPDATES = r"""
(async () => {
  const client = newClient();
  const reqids = P.payloads.map(() => genIdent('hex'));
  const send = (i) => client.requestUpdate(reqids[i], unhex(P.payloads[i]), P.rpcTimeout);
  let indexes;
  const t0 = Date.now();
  if (P.concurrent) {
    indexes = await Promise.all(P.payloads.map((_, i) => send(i)));
  } else {
    indexes = [];
    for (let i = 0; i < P.payloads.length; ++i) indexes.push(await send(i));
  }
  const elapsedMs = Date.now() - t0;
  client.close();
  done({indexes, reqids, elapsedMs});
})().catch(fail);
"""


def js_updates(
    urls: Mapping[str, str] | Sequence[str],
    ident: str,
    payloads: Sequence[bytes] | int,
    *,
    concurrent: bool = False,
    rpc_timeout_ms: int = 20000,
) -> NodeJob:
    """Commit updates with ``ZmqRaftClient.requestUpdate(reqid, data, rpctimeout)``.

    ``payloads`` is a list of data blobs, or a count ``n`` for ``b"update-0" ..``. Each gets a
    fresh reqid from the reference's ``utils.id.genIdent('hex')``. Sequential by default (each
    awaits the previous), all in flight at once with ``concurrent=True``. Result:
    ``{indexes: [int...], reqids: [hex24...], elapsedMs}`` in payload order.
    """
    if isinstance(payloads, int):
        payloads = [f"update-{i}".encode() for i in range(payloads)]
    params = _base_params(urls, ident) | {
        "payloads": [p.hex() for p in payloads],
        "concurrent": concurrent,
        "rpcTimeout": rpc_timeout_ms,
    }
    return NodeJob(_JS_UPDATES, params, timeout=rpc_timeout_ms / 1000 + 15)


_JS_IDEMPOTENT = r"""
(async () => {
  const client = newClient();
  const reqid = P.reqid || genIdent('hex');
  const data = unhex(P.payload);
  const first = await client.requestUpdate(reqid, data, P.rpcTimeout);
  // A second client (new connection) retrying the same request id, as after a lost answer.
  const client2 = newClient();
  const second = await client2.requestUpdate(reqid, data, P.rpcTimeout);
  // And the same client once more, with different data: the reqid alone decides.
  const third = await client.requestUpdate(Buffer.from(reqid, 'hex'), unhex(P.payload + '00'),
                                           P.rpcTimeout);
  client.close();
  client2.close();
  done({reqid, first, second, third});
})().catch(fail);
"""


def js_idempotent_retry(
    urls: Mapping[str, str] | Sequence[str],
    ident: str,
    payload: bytes = b"idempotent",
    reqid: bytes | None = None,
    rpc_timeout_ms: int = 20000,
) -> NodeJob:
    """Send one update, then retry it with the same reqid (new client, then the same client
    with a 12-byte Buffer id and different data).

    Result: ``{reqid: hex24, first, second, third}`` (log indexes; all equal when the server
    is idempotent).
    """
    params = _base_params(urls, ident) | {
        "payload": payload.hex(),
        "reqid": reqid.hex() if reqid is not None else None,
        "rpcTimeout": rpc_timeout_ms,
    }
    return NodeJob(_JS_IDEMPOTENT, params, timeout=rpc_timeout_ms / 1000 + 15)


_JS_READ_LOG = r"""
(async () => {
  const client = newClient();
  const entries = [];
  const snapshots = [];
  let batches = 0;
  const receiver = (status, chunk, lastIndex, byteOffset, snapshotSize, isLastChunk,
                    snapshotTerm) => {
    batches++;
    if (Buffer.isBuffer(chunk)) {  // snapshot chunk (reported with status 2 by the client)
      snapshots.push({index: lastIndex, offset: byteOffset, size: snapshotSize,
                      term: snapshotTerm, isLastChunk, length: chunk.length});
      return;
    }
    let index = lastIndex - chunk.length;
    for (const buf of chunk) {
      const e = raft.common.LogEntry.bufferToLogEntry(buf, ++index);
      entries.push({index: e.logIndex, type: e.entryType, term: e.readEntryTerm(),
                    reqid: e.readRequestKey('hex'), data: hex(e.readEntryData())});
    }
  };
  const complete = await client.requestEntries(P.prevIndex, P.count, receiver, P.rpcTimeout);
  client.close();
  done({complete, batches, count: entries.length,
        firstIndex: entries.length ? entries[0].index : null,
        lastIndex: entries.length ? entries[entries.length - 1].index : null,
        entries, snapshots});
})().catch(fail);
"""


def js_read_log(
    urls: Mapping[str, str] | Sequence[str],
    ident: str,
    prev_index: int = 0,
    count: int | None = None,
    rpc_timeout_ms: int = 20000,
) -> NodeJob:
    """Read the log with ``ZmqRaftClient.requestEntries(prevIndex, count, receiver, rpctimeout)``.

    Reads entries after ``prev_index`` (0 = from the start) up to the leader's lastApplied, or
    ``count`` of them. Result: ``{complete, batches, count, firstIndex, lastIndex, entries:
    [{index, type (0 state, 1 config, 2 checkpoint), term, reqid: hex24, data: hex}],
    snapshots: [{index, offset, size, term, isLastChunk, length}]}``.
    """
    params = _base_params(urls, ident) | {
        "prevIndex": prev_index,
        "count": count,
        "rpcTimeout": rpc_timeout_ms,
    }
    return NodeJob(_JS_READ_LOG, params, timeout=rpc_timeout_ms / 1000 + 15)


_JS_SUBSCRIBE = r"""
(async () => {
  const sub = new ZmqRaftSubscriber(P.urls, {secret: P.ident, lastIndex: P.lastIndex});
  const entries = [];
  let finished = false;
  const timer = setTimeout(() => fail(new Error(
    `subscriber timeout: got ${entries.length} of ${P.k} entries`)), P.timeoutMs);
  sub.on('error', fail);
  sub.on('data', (chunk) => {
    if (finished) return;
    if (chunk.isLogEntry) {
      entries.push({index: chunk.logIndex, type: chunk.entryType, term: chunk.readEntryTerm(),
                    reqid: chunk.readRequestKey('hex'), data: hex(chunk.readEntryData())});
    } else {
      entries.push({index: chunk.logIndex, snapshotChunk: true, length: chunk.length});
    }
    if (entries.length >= P.k) {
      finished = true;
      clearTimeout(timer);
      const pubUrl = sub.url;
      sub.close();
      done({count: entries.length, firstIndex: entries[0].index,
            lastIndex: entries[entries.length - 1].index, pubUrl, entries});
    }
  });
  // Optionally write updates through the subscriber's Writable side (UpdateRequest objects).
  for (const p of P.writes) {
    const ureq = new raft.common.LogEntry.UpdateRequest(unhex(p), genIdent('buffer'));
    sub.write(ureq);
  }
})().catch(fail);
"""


def js_subscribe(
    urls: Mapping[str, str] | Sequence[str],
    ident: str,
    k: int,
    *,
    last_index: int = 0,
    writes: Sequence[bytes] = (),
    timeout_ms: int = 20000,
) -> NodeJob:
    """Receive ``k`` log entries after ``last_index`` with ``ZmqRaftSubscriber``.

    The subscriber asks the leader for its PUB URL (``*``), subscribes to StateBroadcast and
    fills gaps with RequestEntries, so this exercises both. ``writes`` are optionally sent as
    updates through the subscriber's Writable side first. Result: ``{count, firstIndex,
    lastIndex, pubUrl, entries: [{index, type, term, reqid, data}]}``.
    """
    params = _base_params(urls, ident) | {
        "k": k,
        "lastIndex": last_index,
        "writes": [w.hex() for w in writes],
        "timeoutMs": timeout_ms,
    }
    return NodeJob(_JS_SUBSCRIBE, params, timeout=timeout_ms / 1000 + 15)


def iter_state_data(entries: Iterable[Mapping[str, Any]]) -> Iterator[tuple[int, bytes]]:
    """Yield ``(index, data)`` for the STATE entries (type 0) of a read/subscribe result."""
    for e in entries:
        if e.get("type") == 0:
            yield int(e["index"]), bytes.fromhex(e["data"])
