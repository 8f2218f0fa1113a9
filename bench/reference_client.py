"""Run ``bench/reference_loadgen.js`` (the reference's own ``ZmqRaftClient`` as the load
generator) from the Python benchmarks.

Why: ``bench/loadgen.py`` is our own wire-level generator; the issue asks for the reference's
client too, so neither server is measured only with a client written by its own side. One
Node process per call runs a list of phases against one cluster and returns their results.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "tests" / "interop"), str(ROOT / "tests")]

from integration.cluster import free_ports  # noqa: E402
from reference import NODE_MODULES  # noqa: E402

SCRIPT = Path(__file__).with_name("reference_loadgen.js")


@dataclass(frozen=True)
class NodeUpdates:
    """Result of one "updates" phase (RequestUpdate throughput and latency)."""

    inflight: int
    rate: float
    p50_ms: float
    p99_ms: float
    client_cpu: float
    """CPU seconds the Node client used per second of the phase (1.0: a whole core)."""


@dataclass(frozen=True)
class NodeRead:
    """Result of one "read" phase (RequestEntries of the whole log)."""

    entries: int
    seconds: float
    client_cpu: float
    """CPU seconds the Node client used per second of the read (1.0: a whole core)."""

    @property
    def rate(self) -> float:
        return self.entries / self.seconds


def updates_phase(inflight: int, total: int, size: int = 100) -> dict[str, Any]:
    """A phase committing ``total`` updates of ``size`` bytes, ``inflight`` outstanding."""
    return {"kind": "updates", "inflight": inflight, "total": total, "size": size}


def read_phase(prev_index: int = 0) -> dict[str, Any]:
    """A phase reading every committed entry after ``prev_index`` with requestEntries."""
    return {"kind": "read", "prevIndex": prev_index}


def node_command(
    urls: Sequence[str], ident: str, phases: Sequence[Mapping[str, Any]]
) -> tuple[list[str], dict[str, str]]:
    """The command line and environment that run ``phases`` against the cluster at ``urls``
    (for a caller that must do something while they run, such as ``bench.path_trace``)."""
    params = {"urls": list(urls), "ident": ident, "phases": list(phases)}
    return ["node", str(SCRIPT), json.dumps(params)], {**os.environ, "NODE_PATH": str(NODE_MODULES)}


def run_phases(
    urls: Sequence[str], ident: str, phases: Sequence[Mapping[str, Any]], timeout: float = 600.0
) -> list[NodeUpdates | NodeRead]:
    """Run ``phases`` in one Node process against the cluster at ``urls``; results in order.

    Raises ``RuntimeError`` with the program's stderr when it fails."""
    command, env = node_command(urls, ident, phases)
    proc = subprocess.run(
        command,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        env=env,
        timeout=timeout,
        check=False,
    )
    if proc.returncode != 0:
        raise RuntimeError(
            f"reference_loadgen.js exited with {proc.returncode}: {proc.stderr.decode()[-2000:]}"
        )
    lines = [ln for ln in proc.stdout.decode().splitlines() if ln.strip()]
    out: list[NodeUpdates | NodeRead] = []
    for r in json.loads(lines[-1])["results"]:
        if r["kind"] == "updates":
            out.append(
                NodeUpdates(r["inflight"], r["rate"], r["p50_ms"], r["p99_ms"], r["clientCpu"])
            )
        else:
            out.append(NodeRead(r["entries"], r["seconds"], r["clientCpu"]))
    return out


@contextmanager
def null_server(entries: int, batch: int) -> Iterator[str]:
    """``bench.null_server`` (a server that does no work) in its own process; yields its URL."""
    [port] = free_ports(1)
    proc = subprocess.Popen(
        [sys.executable, "-m", "bench.null_server", str(entries), str(batch), str(port)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        cwd=ROOT,
    )
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().decode().strip()
        if not url:
            raise RuntimeError("bench.null_server did not start")
        yield url
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
