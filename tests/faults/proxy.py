"""A fault-injecting TCP proxy for ZeroMQ (ZMTP 3) links between ``raftlog-peer`` processes.

Why a proxy (and not network namespaces + nftables): it needs no root, so it runs in CI and on
any laptop; this kernel has no ``netem`` (no delay without the proxy anyway); and it works at
*message* granularity. Packet-level filtering cannot make a TCP link one-way — dropping one
direction also drops the ACKs of the other, so both stall — whereas here the leader's
AppendEntries really arrive while the follower's answers (and its own requests) vanish.

Topology: every peer *binds* a private port and *advertises* the proxy's port for it (the
cluster file's ``bind`` vs ``url``), so every peer-to-peer and client connection passes through
one proxy listener per peer. A directed link ``A -> B`` is "every message A sends that B
receives": A's requests on the connection A opened to B's listener, plus A's answers on the
connection B opened to A's listener. Rules are therefore per (sender, receiver) pair.

How the proxy tells links apart: the advertised URLs live in the replicated configuration
(CONFIG entries), so all peers see the same URL for B and a proxy per directed link is
impossible. Instead the proxy asks the kernel who opened each accepted connection: the
client end's socket inode (``/proc/net/tcp``) is found among the file descriptors of the
processes running this cluster (``/proc/<pid>/fd``; they are recognised by the cluster file in
their command line and named by their ``--id``). Everything else (the test's clients, probes)
is the sender/receiver ``"client"``. Linux only; same user (or root) as the peers.

Faults, per directed link: ``drop`` (probability a whole message is lost; 1.0 = a silent
partition), ``delay_ms`` + ``jitter_ms`` (order kept, as TCP would), and ``cut`` (abort the
live connections between two parties and refuse new ones: a partition with RSTs). ZMTP
commands (greeting, handshake) always pass, so a connection made during a fault is usable as
soon as it heals.

Run as ``python -m faults.proxy`` (from ``tests/``); it prints ``CONTROL <port>`` and takes one
JSON object per line on that port (see ``Proxy.command``). ``faults.network`` drives it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
import struct
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

CLIENT = "client"
"""The name of every connection end that is not a peer of the cluster."""

_GREETING = 64  # ZMTP 3.x greeting, each direction
_MORE, _LONG, _COMMAND = 0x01, 0x02, 0x04


@dataclass
class LinkRule:
    """What happens to messages from one party to another."""

    drop: float = 0.0
    delay_ms: float = 0.0
    jitter_ms: float = 0.0
    cut: bool = False

    @property
    def is_pass(self) -> bool:
        return not (self.drop or self.delay_ms or self.jitter_ms or self.cut)


@dataclass(eq=False)
class Connection:
    initiator: str
    acceptor: str
    writers: list[asyncio.StreamWriter] = field(default_factory=list)

    def abort(self) -> None:
        for writer in self.writers:
            writer.transport.abort()


def _inode_of(local_port: int, remote_port: int) -> str | None:
    """Inode of the loopback socket ``127.0.0.1:local_port -> 127.0.0.1:remote_port``."""
    want_local = f"0100007F:{local_port:04X}"
    want_remote = f"0100007F:{remote_port:04X}"
    with contextlib.suppress(OSError), open("/proc/net/tcp") as table:
        next(table)
        for line in table:
            cols = line.split()
            if cols[1] == want_local and cols[2] == want_remote:
                return cols[9]
    return None


def _peer_id_of(cmdline: list[str], tag: str) -> str | None:
    if tag not in cmdline or "--id" not in cmdline:
        return None
    at = cmdline.index("--id")
    return cmdline[at + 1] if at + 1 < len(cmdline) else None


def _owner(inode: str, tag: str) -> str | None:
    """The ``--id`` of the cluster process holding socket ``inode``, if one does."""
    target = f"socket:[{inode}]"
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            cmdline = Path(entry.path, "cmdline").read_bytes().decode(errors="replace")
            peer_id = _peer_id_of(cmdline.split("\0"), tag)
            if peer_id is None:
                continue
            for fd in os.scandir(f"{entry.path}/fd"):
                with contextlib.suppress(OSError):
                    if os.readlink(fd.path) == target:
                        return peer_id
        except OSError:
            continue
    return None


class Proxy:
    """The listeners, the rules and the live connections (one asyncio loop)."""

    def __init__(self) -> None:
        self.tag = ""
        self.rules: dict[tuple[str, str], LinkRule] = {}
        self.servers: dict[str, asyncio.Server] = {}
        self.targets: dict[str, int] = {}
        self.connections: set[Connection] = set()
        self.passed: Counter[str] = Counter()
        self.dropped: Counter[str] = Counter()
        self.refused: Counter[str] = Counter()
        self.rng = random.Random(int(os.environ.get("FAULT_PROXY_SEED", "0")) or None)

    def rule(self, sender: str, receiver: str) -> LinkRule:
        for key in ((sender, receiver), (sender, "*"), ("*", receiver)):
            if key in self.rules:
                return self.rules[key]
        return LinkRule()

    # -- control ---------------------------------------------------------------------------
    async def command(self, req: dict[str, Any]) -> dict[str, Any]:
        op = req["op"]
        if op == "tag":  # the cluster file path every peer has on its command line
            self.tag = str(req["tag"])
        elif op == "listen":
            peer = str(req["peer"])
            self.targets[peer] = int(req["target"])
            if peer not in self.servers:
                self.servers[peer] = await asyncio.start_server(
                    lambda r, w, p=peer: self._accept(p, r, w), "127.0.0.1", int(req["port"])
                )
        elif op == "rule":
            rule = LinkRule(
                float(req.get("drop", 0)),
                float(req.get("delay_ms", 0)),
                float(req.get("jitter_ms", 0)),
                bool(req.get("cut", False)),
            )
            key = (str(req["src"]), str(req["dst"]))
            if rule.is_pass:
                self.rules.pop(key, None)
            else:
                self.rules[key] = rule
            if rule.cut:
                for conn in list(self.connections):
                    if {conn.initiator, conn.acceptor} == set(key) or "*" in key:
                        conn.abort()
        elif op == "heal":
            self.rules.clear()
        elif op == "stats":
            return {
                "passed": dict(self.passed),
                "dropped": dict(self.dropped),
                "refused": dict(self.refused),
                "connections": sorted(f"{c.initiator}->{c.acceptor}" for c in self.connections),
            }
        else:
            raise ValueError(f"unknown op {op!r}")
        return {"ok": True}

    async def serve_control(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        try:
            while line := await reader.readline():
                try:
                    answer = await self.command(json.loads(line))
                except Exception as exc:  # a bad command is reported, the proxy keeps running
                    answer = {"error": f"{type(exc).__name__}: {exc}"}
                writer.write(json.dumps(answer).encode() + b"\n")
                await writer.drain()
        finally:
            writer.close()

    # -- data ------------------------------------------------------------------------------
    async def _accept(
        self, acceptor: str, creader: asyncio.StreamReader, cwriter: asyncio.StreamWriter
    ) -> None:
        _host, client_port = cwriter.get_extra_info("peername")[:2]
        listen_port = cwriter.get_extra_info("sockname")[1]
        inode = await asyncio.to_thread(_inode_of, client_port, listen_port)
        initiator = (inode and await asyncio.to_thread(_owner, inode, self.tag)) or CLIENT
        if self.rule(initiator, acceptor).cut or self.rule(acceptor, initiator).cut:
            self.refused[f"{initiator}->{acceptor}"] += 1
            cwriter.transport.abort()
            return
        try:
            ureader, uwriter = await asyncio.open_connection("127.0.0.1", self.targets[acceptor])
        except OSError:
            cwriter.transport.abort()  # the peer is down: the caller sees a refused connection
            return
        conn = Connection(initiator, acceptor, [cwriter, uwriter])
        self.connections.add(conn)
        try:
            await asyncio.gather(
                self._pump(creader, uwriter, initiator, acceptor),
                self._pump(ureader, cwriter, acceptor, initiator),
            )
        finally:
            self.connections.discard(conn)
            conn.abort()

    async def _pump(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, src: str, dst: str
    ) -> None:
        """Copy one direction message by message, applying the (src, dst) rule to each."""
        link = f"{src}->{dst}"
        queue: asyncio.Queue[tuple[float, bytes] | None] = asyncio.Queue()
        sender = asyncio.create_task(self._send(queue, writer))
        last_release = 0.0
        try:
            greeting = 0  # forwarded as it comes: each side waits for the other's signature
            while greeting < _GREETING:
                chunk = await reader.read(_GREETING - greeting)
                if not chunk:
                    return
                writer.write(chunk)
                greeting += len(chunk)
            message: list[bytes] = []
            while True:
                head = await reader.readexactly(1)
                flags = head[0]
                size_bytes = await reader.readexactly(8 if flags & _LONG else 1)
                size = struct.unpack(">Q", size_bytes)[0] if flags & _LONG else size_bytes[0]
                body = await reader.readexactly(size) if size else b""
                frame = head + size_bytes + body
                if flags & _COMMAND:
                    queue.put_nowait((0.0, frame))
                    continue
                message.append(frame)
                if flags & _MORE:
                    continue
                data, message = b"".join(message), []
                rule = self.rule(src, dst)
                if rule.cut or (rule.drop and self.rng.random() < rule.drop):
                    self.dropped[link] += 1
                    continue
                self.passed[link] += 1
                release = 0.0
                if rule.delay_ms or rule.jitter_ms:
                    wait = rule.delay_ms + self.rng.uniform(-rule.jitter_ms, rule.jitter_ms)
                    release = max(last_release, time.monotonic() + max(0.0, wait) / 1000)
                    last_release = release
                queue.put_nowait((release, data))
        except (asyncio.IncompleteReadError, ConnectionError, OSError):
            pass
        finally:
            queue.put_nowait(None)
            with contextlib.suppress(Exception):
                await sender
            writer.transport.abort()

    @staticmethod
    async def _send(
        queue: asyncio.Queue[tuple[float, bytes] | None], writer: asyncio.StreamWriter
    ) -> None:
        with contextlib.suppress(ConnectionError, OSError):
            while (item := await queue.get()) is not None:
                release, data = item
                if release and (wait := release - time.monotonic()) > 0:
                    await asyncio.sleep(wait)
                writer.write(data)
                await writer.drain()


async def main() -> None:
    proxy = Proxy()
    control = await asyncio.start_server(proxy.serve_control, "127.0.0.1", 0)
    print(f"CONTROL {control.sockets[0].getsockname()[1]}", flush=True)
    # The parent holds our stdin open; when it goes away (even by kill -9) we stop too.
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.buffer.read)


if __name__ == "__main__":
    asyncio.run(main())
    os._exit(0)  # don't wait for pumps of connections the peers still hold open
