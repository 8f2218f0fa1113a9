"""Drive the fault proxy (``faults.proxy``) from a test: partitions, one-way links, delay, loss.

``ProxyNetwork`` starts the proxy as a child process (so the test's own work never stalls
traffic between peers), talks to it over its control port and stops it on ``close``. The
proxy also exits by itself if the test process dies (it watches its stdin).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from faults.proxy import CLIENT

__all__ = ["CLIENT", "ProxyNetwork"]

_TESTS_DIR = Path(__file__).resolve().parent.parent


class ProxyNetwork:
    """One proxy process with a listener per peer and rules per directed link."""

    def __init__(self, tag: str, seed: int = 0) -> None:
        env = dict(os.environ, PYTHONPATH=str(_TESTS_DIR), FAULT_PROXY_SEED=str(seed or 1))
        self._process = subprocess.Popen(
            [sys.executable, "-m", "faults.proxy"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=env,
        )
        assert self._process.stdout is not None
        line = self._process.stdout.readline().decode()
        if not line.startswith("CONTROL "):
            self.close()
            raise RuntimeError(f"fault proxy did not start (said {line!r})")
        self._control = socket.create_connection(("127.0.0.1", int(line.split()[1])), timeout=10)
        self._replies = self._control.makefile("rb")
        self.call(op="tag", tag=tag)

    def call(self, **request: Any) -> dict[str, Any]:
        self._control.sendall(json.dumps(request).encode() + b"\n")
        answer: dict[str, Any] = json.loads(self._replies.readline())
        if "error" in answer:
            raise RuntimeError(f"fault proxy: {answer['error']}")
        return answer

    def listen(self, peer_id: str, port: int, target_port: int) -> None:
        """Serve ``peer_id``'s advertised ``port``, forwarding to where it binds."""
        self.call(op="listen", peer=peer_id, port=port, target=target_port)

    def set_link(
        self,
        src: str,
        dst: str,
        *,
        drop: float = 0.0,
        delay_ms: float = 0.0,
        jitter_ms: float = 0.0,
        cut: bool = False,
    ) -> None:
        """Rule for messages ``src`` sends to ``dst`` (peer ids, ``"client"`` or ``"*"``);
        all zero = pass."""
        self.call(
            op="rule", src=src, dst=dst, drop=drop, delay_ms=delay_ms, jitter_ms=jitter_ms, cut=cut
        )

    def one_way(self, src: str, dst: str) -> None:
        """Everything ``src`` sends to ``dst`` is lost; ``dst`` -> ``src`` still flows."""
        self.set_link(src, dst, drop=1.0)

    def partition(self, side: Iterable[str], others: Iterable[str]) -> None:
        """No message crosses between ``side`` and ``others`` in either direction (silent:
        connections stay up, messages vanish)."""
        others = list(others)
        for a in side:
            for b in others:
                self.set_link(a, b, drop=1.0)
                self.set_link(b, a, drop=1.0)

    def cut(self, a: str, b: str) -> None:
        """Abort the connections between ``a`` and ``b`` and refuse new ones (RST partition)."""
        self.set_link(a, b, cut=True)

    def heal(self) -> None:
        self.call(op="heal")

    def stats(self) -> dict[str, Any]:
        """Per-link counters ``passed`` / ``dropped`` / ``refused`` and live connections."""
        return self.call(op="stats")

    def dropped(self, src: str, dst: str) -> int:
        return int(self.stats()["dropped"].get(f"{src}->{dst}", 0))

    def close(self) -> None:
        if self._process.poll() is None:
            self._process.kill()
        self._process.wait(10)
        for stream in (self._process.stdin, self._process.stdout):
            if stream is not None:
                stream.close()
        if hasattr(self, "_control"):
            self._replies.close()
            self._control.close()
