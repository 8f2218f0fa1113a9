"""``raftlog-local-cluster``: run every peer of a cluster file on this machine, in the
foreground (what ``make run`` does).

Each peer is a ``raftlog-peer`` child process logging JSON lines; this launcher relays every
line the moment the child writes it, rendered in the same console format a lone
``raftlog-peer`` uses on a terminal (``raftlog.log.render_console``, leadership changes
highlighted). It announces where each peer listens and how to reach the CLIs, and on Ctrl-C
(SIGINT) or SIGTERM stops every peer with SIGTERM (SIGKILL after 10 s) before exiting.

A peer that exits on its own (killed, crashed, stopped by an operator) is reported with its
exit status and how to start it again, and the others **keep running**: a local cluster is
where one watches a cluster survive a failure (the status page, ``raftlog-admin health``
exiting 1, a new leader), so losing a peer must not take the rest down. The launcher ends
when every peer has exited, and then exits non-zero if any peer ended abnormally.
"""

from __future__ import annotations

import argparse
import json
import os
import selectors
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from raftlog.cli.common import add_version_argument
from raftlog.config import load_cluster_file, load_peer_config
from raftlog.errors import ConfigError
from raftlog.log import render_console

_READ_SIZE = 1 << 16
STOP_GRACE_S = 10.0


class LineRelay:
    """Complete lines from several pipes, as soon as each is written.

    Reads raw descriptors with ``os.read`` and splits lines itself: a buffered ``readline``
    would pull several lines into a Python buffer the selector cannot see, leaving all but the
    first stuck until the child writes again (or exits).
    """

    def __init__(self) -> None:
        self._selector = selectors.DefaultSelector()
        self._partial: dict[int, bytes] = {}

    def add(self, name: str, fd: int) -> None:
        """Relay the pipe ``fd``; its lines come back tagged with ``name`` (the peer id)."""
        self._partial[fd] = b""
        self._selector.register(fd, selectors.EVENT_READ, name)

    @property
    def open_count(self) -> int:
        """Pipes not yet at end-of-file: the launcher drains until this is 0 on shutdown."""
        return len(self._partial)

    def poll(self, timeout: float) -> list[tuple[str, bytes]]:
        """Lines that became complete within ``timeout`` seconds, as ``(name, line)``; a
        pipe's unterminated last line is returned when the pipe closes."""
        if not self._partial:
            time.sleep(timeout)
            return []
        lines: list[tuple[str, bytes]] = []
        for key, _ in self._selector.select(timeout):
            fd = key.fd
            try:
                chunk = os.read(fd, _READ_SIZE)
            except OSError:
                chunk = b""
            data = self._partial[fd] + chunk
            if not chunk:
                self._selector.unregister(fd)
                del self._partial[fd]
                if data:
                    lines.append((key.data, data))
                continue
            *complete, self._partial[fd] = data.split(b"\n")
            lines.extend((key.data, line) for line in complete)
        return lines

    def close(self) -> None:
        """Release the selector (the pipes belong to the child processes' Popen objects)."""
        self._selector.close()


def render_peer_line(peer_id: str, line: bytes, *, colors: bool = False) -> str:
    """A child's output line for the console: JSON events in the shared console format,
    anything else (a traceback, a message from the interpreter) prefixed with the peer."""
    text = line.decode("utf-8", "replace").rstrip()
    try:
        record: Any = json.loads(text)
    except ValueError:
        record = None
    if not isinstance(record, dict):
        return f"[peer {peer_id}] {text}"
    record.setdefault("peer_id", peer_id)
    return render_console(record, colors=colors)


def cli_hint(config: str) -> str:
    """How to reach the CLIs installed next to this interpreter (they are not on PATH)."""
    bin_dir = Path(sys.executable).parent
    return f'CLIs: export PATH="{bin_dir}:$PATH"   then e.g.: raftlog-admin -c {config} status'


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``raftlog-local-cluster`` (``make run``): every peer of a cluster file in
    the foreground; Ctrl-C stops them all, a peer that dies alone is reported."""
    parser = argparse.ArgumentParser(
        prog="raftlog-local-cluster",
        description="Run every peer of a cluster file locally, in the foreground.",
    )
    add_version_argument(parser)
    parser.add_argument("config", help="cluster TOML file, e.g. cluster-configs/local-3.toml")
    args = parser.parse_args(argv)
    try:
        doc = load_cluster_file(args.config)
        ids = [str(p.get("id")) for p in doc.get("peers", []) if isinstance(p, dict)]
        settings = [load_peer_config(args.config, peer_id) for peer_id in ids]
    except ConfigError as exc:
        print(f"raftlog-local-cluster: error: {exc}", file=sys.stderr)
        return 2
    if not settings:
        print(f"raftlog-local-cluster: error: {args.config}: no [[peers]]", file=sys.stderr)
        return 2
    peer_bin = str(Path(sys.executable).with_name("raftlog-peer"))
    # JSON lines from the children (rendered here); PYTHONUNBUFFERED covers anything a child
    # prints outside the logger, e.g. a traceback on the way out.
    env = dict(os.environ, RAFTLOG_LOG_FORMAT="json", PYTHONUNBUFFERED="1")
    colors = sys.stdout.isatty()
    children: dict[str, subprocess.Popen[bytes]] = {}
    relay = LineRelay()
    stopping = False

    def request_stop(signum: int, _frame: object) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGINT, request_stop)
    signal.signal(signal.SIGTERM, request_stop)
    for s in settings:
        print(f"peer {s.id}: raft {s.url}  broadcast {s.pub_url}  data {s.data_dir}", flush=True)
        child = subprocess.Popen(
            [peer_bin, "-c", args.config, "--id", s.id],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,  # Ctrl-C reaches the launcher only; it stops the peers
        )
        children[s.id] = child
        assert child.stdout is not None
        relay.add(s.id, child.stdout.fileno())
    print(f"cluster ident {settings[0].ident!r}; Ctrl-C stops all peers", flush=True)
    print(cli_hint(args.config), flush=True)

    def show(lines: list[tuple[str, bytes]]) -> None:
        for peer_id, line in lines:
            print(render_peer_line(peer_id, line, colors=colors), flush=True)

    exit_code = 0
    reported: set[str] = set()
    while not stopping and len(reported) < len(children):
        show(relay.poll(0.2))
        for peer_id, child in children.items():
            status = child.poll()
            if status is None or peer_id in reported:
                continue
            reported.add(peer_id)
            show(relay.poll(0))
            if status != 0:  # 0: a clean stop, e.g. a peer removed from the configuration
                exit_code = 1
            how = f"signal {-status}" if status < 0 else f"exit code {status}"
            print(
                f"peer {peer_id} exited ({how}); the other peers keep running. Start it again"
                f" with: {peer_bin} -c {args.config} --id {peer_id}",
                file=sys.stderr,
                flush=True,
            )
    for child in children.values():
        if child.poll() is None:
            child.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + STOP_GRACE_S
    while relay.open_count and time.monotonic() < deadline:
        show(relay.poll(0.2))
    for child in children.values():
        try:
            child.wait(max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()
    show(relay.poll(0))
    relay.close()
    print("all peers stopped", flush=True)
    return exit_code


if __name__ == "__main__":
    sys.exit(main())
