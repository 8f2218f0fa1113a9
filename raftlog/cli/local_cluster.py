"""``raftlog-local-cluster``: run every peer of a cluster file on this machine, in the
foreground (what ``make run`` does).

Each peer is a ``raftlog-peer`` child process logging JSON; this launcher prints one readable
line per event, prefixed with the peer id, announces where each peer listens and when a
leader is elected, and on Ctrl-C (SIGINT) or SIGTERM stops every peer with SIGTERM (SIGKILL
after 10 s) before exiting. If a peer exits on its own, the others are stopped too and the
launcher exits non-zero.
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
from typing import IO, Any

from raftlog.config import load_cluster_file, load_peer_config
from raftlog.errors import ConfigError

QUIET_EVENTS = frozenset({"role_changed"})


def _render(peer_id: str, line: bytes) -> str:
    text = line.decode("utf-8", "replace").rstrip()
    try:
        record: dict[str, Any] = json.loads(text)
    except ValueError:
        return f"[peer {peer_id}] {text}"
    stamp = str(record.pop("timestamp", ""))[11:19]
    event = record.pop("event", "?")
    level = record.pop("level", "info")
    record.pop("peer_id", None)
    fields = " ".join(f"{k}={v}" for k, v in record.items())
    marker = "" if level == "info" else f" {level.upper()}"
    return f"{stamp} [peer {peer_id}]{marker} {event} {fields}".rstrip()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="raftlog-local-cluster",
        description="Run every peer of a cluster file locally, in the foreground.",
    )
    parser.add_argument("config", help="cluster TOML file, e.g. cluster-configs/local-3.toml")
    args = parser.parse_args(argv)
    try:
        doc = load_cluster_file(args.config)
        ids = [str(p.get("id")) for p in doc.get("peers", []) if isinstance(p, dict)]
        settings = [load_peer_config(args.config, peer_id) for peer_id in ids]
    except ConfigError as exc:
        print(f"raftlog-local-cluster: error: {exc}", file=sys.stderr)
        return 2
    peer_bin = str(Path(sys.executable).with_name("raftlog-peer"))
    env = dict(os.environ, RAFTLOG_LOG_FORMAT="json")
    children: dict[str, subprocess.Popen[bytes]] = {}
    selector = selectors.DefaultSelector()
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
        selector.register(child.stdout, selectors.EVENT_READ, s.id)
    print(f"cluster ident {settings[0].ident!r}; Ctrl-C stops all peers", flush=True)
    exit_code = 0
    leader: tuple[str, int] | None = None
    while not stopping:
        for key, _ in selector.select(timeout=0.2):
            stream: IO[bytes] = key.fileobj  # type: ignore[assignment]
            line = stream.readline()
            if not line:
                selector.unregister(stream)
                continue
            print(_render(key.data, line), flush=True)
            if b'"became_leader"' in line:
                term = json.loads(line).get("term", 0)
                if leader != (key.data, term):
                    leader = (key.data, term)
                    print(f"*** leader elected: peer {key.data} (term {term})", flush=True)
        dead = [pid for pid, child in children.items() if child.poll() is not None]
        if dead:
            print(f"peer(s) {', '.join(dead)} exited; stopping the cluster", file=sys.stderr)
            exit_code = 1
            break
    for child in children.values():
        if child.poll() is None:
            child.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + 10
    for peer_id, child in children.items():
        try:
            child.wait(max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()
        if child.stdout is not None:
            for line in child.stdout:
                print(_render(peer_id, line), flush=True)
    print("all peers stopped", flush=True)
    return exit_code


if __name__ == "__main__":
    sys.exit(main())
