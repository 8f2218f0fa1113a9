"""Cluster benchmark: a three-peer raftlog cluster and a three-peer reference (zmq-raft)
cluster, each driven by two load generators in one run: the reference's own client library
(``bench/reference_loadgen.js``, npm zmq-raft's ``ZmqRaftClient``) and our protocol-level
Python generator (``bench.loadgen``).

Measured for both: RequestUpdate throughput and latency with 1, 16 and 128 updates in flight
(100-byte entries, fsync on), RequestEntries read rate over the whole log (``READ_TARGET``
entries, the same for both clusters),
time from ``kill -9`` of the leader to the next committed update, and time from restarting
all three peers (on the log written above) to the first committed update. For raftlog alone:
a peer started on a 1,000,000-entry log until it answers and commits.

Runs alternate between the two clusters (each started fresh per round), medians of
``ROUNDS`` rounds; ratios are raftlog / reference from the same invocation. The two
clusters never run at the same time: the machine has 2 cores. Next to the rates: CPU
seconds per entry (leader, for reads; all peers, for updates), which other work on a shared
machine hardly moves, and the load average before and after. Each round also measures the
floor (``bench.floor``: fdatasync p50 in the data directories' file system, the ZeroMQ round
trip, a minimal raw-TCP + fdatasync three-process replicated write), reported beside the
figures so the distance to the physical limit shows in every run. About 4 minutes on a quiet
2-core machine (``RAFTLOG_BENCH_ROUNDS`` changes the number of rounds).
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Protocol

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "tests"), str(ROOT / "tests" / "interop")]

from integration.cluster import PeerCluster, wait_for  # noqa: E402
from reference import ReferenceCluster  # noqa: E402

from bench import floor  # noqa: E402
from bench.cluster_reads import CEILING_BATCH, READ_NOTE, READ_TARGET, READS, fill, reads  # noqa: E402
from bench.loadgen import (  # noqa: E402
    on_leader_retrying,
    run_updates,
    update_once,
)
from bench.prefill import write_log  # noqa: E402
from bench.procstat import load_average, total_cpu  # noqa: E402
from bench.reference_client import (  # noqa: E402
    NodeRead,
    NodeUpdates,
    null_server,
    read_phase,
    run_phases,
    updates_phase,
)

ROUNDS = int(os.environ.get("RAFTLOG_BENCH_ROUNDS", "3"))
INFLIGHT = ((1, 400), (16, 4000), (128, 30000))
out_notes: dict[str, list[str]] = {"raftlog": [], "reference": []}
"""Runs cut short by a leader change, per cluster (retried on the new leader; reported)."""


class Cluster(Protocol):
    ident: str
    urls: list[str]
    leader_id: str

    def kill_leader(self) -> None: ...
    def restart_all(self) -> None: ...
    def pids(self) -> list[int]: ...
    def leader_pid(self) -> int: ...


class _Ours:
    def __init__(self, c: PeerCluster, leader_id: str) -> None:
        self.c = c
        self.ident = c.ident
        self.urls = c.urls
        self.leader_id = leader_id

    def kill_leader(self) -> None:
        leader = self.c.wait_leader()
        self.c.kill(leader)

    def restart_all(self) -> None:
        for peer_id in self.c.peers:
            self.c.kill(peer_id)
        self.c.start()

    def pids(self) -> list[int]:
        return self.c.pids()

    def leader_pid(self) -> int:
        self.leader_id = self.c.wait_leader()
        process = self.c.peers[self.leader_id].process
        assert process is not None
        return process.pid


class _Reference:
    def __init__(self, c: ReferenceCluster, leader_id: str) -> None:
        self.c = c
        self.ident = c.ident
        self.urls = list(c.urls.values())
        self.leader_id = leader_id

    def kill_leader(self) -> None:
        self.c.kill(self.c.wait_for_leader())

    def restart_all(self) -> None:
        for peer_id in self.c.running_ids:
            self.c.kill(peer_id)
        self.c.start_all()

    def pids(self) -> list[int]:
        return [self.c.pid(peer_id) for peer_id in self.c.running_ids]

    def leader_pid(self) -> int:
        self.leader_id = self.c.wait_for_leader()
        return self.c.pid(self.leader_id)


@contextmanager
def _cluster(kind: str, workdir: Path) -> Iterator[Any]:
    if kind == "raftlog":
        with PeerCluster(workdir) as c:
            c.start()
            yield _Ours(c, c.wait_stable_leader())
    else:
        with ReferenceCluster(workdir) as rc:
            rc.start_all()
            yield _Reference(rc, rc.wait_for_leader())


def _leader_cpu(c: Cluster) -> tuple[int, float]:
    """The leader's pid and its CPU seconds so far (issue #28's target is the leader's CPU
    per update at 128 in flight)."""
    pid = c.leader_pid()
    return pid, total_cpu([pid])


def _one_round(kind: str, out: dict[str, list[float]]) -> None:
    with (
        tempfile.TemporaryDirectory(prefix=f"bench-{kind}-") as tmp,
        _cluster(kind, Path(tmp)) as c,
    ):
        notes = out_notes[kind]
        # The reference's own client first, then the Python generator, on the same cluster.
        # The busiest phase runs in a Node process of its own, so that the leader's CPU
        # over it is that phase's alone.
        light = [updates_phase(inflight, total) for inflight, total in INFLIGHT[:-1]]
        results = run_phases(c.urls, c.ident, light)
        leader, leader_cpu = _leader_cpu(c)
        results += run_phases(c.urls, c.ident, [updates_phase(*INFLIGHT[-1])])
        out["node_leader_cpu"].append((total_cpu([leader]) - leader_cpu) / INFLIGHT[-1][1] * 1e6)
        for node in results:
            assert isinstance(node, NodeUpdates)
            out[f"node_rate{node.inflight}"].append(node.rate)
            out[f"node_p50_{node.inflight}"].append(node.p50_ms)
            out[f"node_p99_{node.inflight}"].append(node.p99_ms)
            out[f"node_client_cpu{node.inflight}"].append(node.client_cpu)
        written = sum(total for _, total in INFLIGHT)
        for inflight, total in INFLIGHT:
            cpu = total_cpu(c.pids())
            leader, leader_cpu = _leader_cpu(c)
            r = on_leader_retrying(
                c.urls,
                c.ident,
                lambda url, n=inflight, t=total: run_updates(url, c.ident, inflight=n, total=t),
                notes,
                f"loadgen.py, {inflight} in flight",
            )
            written += total
            out[f"rate{inflight}"].append(r.rate)
            out[f"p50_{inflight}"].append(r.p50_ms)
            out[f"p99_{inflight}"].append(r.p99_ms)
            if inflight == 128:
                out["update_cpu"].append((total_cpu(c.pids()) - cpu) / total * 1e6)
                out["leader_cpu"].append((total_cpu([leader]) - leader_cpu) / total * 1e6)
        fill(c, written, notes)
        reads(c, out, notes)
        c.kill_leader()
        t0 = time.perf_counter()
        update_once(c.urls, c.ident)
        out["failover"].append(time.perf_counter() - t0)
        c.restart_all()
        t0 = time.perf_counter()
        update_once(c.urls, c.ident, timeout=120)
        out["restart"].append(time.perf_counter() - t0)


def _ours_on_a_million(out: dict[str, list[float]]) -> None:
    """A single-peer cluster (it leads at once) started on a prebuilt 1M-entry log, written as
    a peer that ran would have left it (``bench.prefill``: log, hard state and the topic
    index's position; without the last, the peer would first rebuild its topic index from
    the whole log, ~3 s per million entries)."""

    with tempfile.TemporaryDirectory(prefix="bench-1m-") as tmp:
        c = PeerCluster(Path(tmp), ids=("1",))
        write_log(c.peers["1"].data_dir, 1_000_000)
        with c:
            for _ in range(ROUNDS):
                t0 = time.perf_counter()
                c.start()
                wait_for("the peer to answer", lambda: c.log_info("1"), 120, interval=0.005)
                out["m_answer"].append(time.perf_counter() - t0)
                update_once(c.urls, c.ident, timeout=120)
                out["m_commit"].append(time.perf_counter() - t0)
                c.kill("1")


def _ceiling(out: dict[str, list[float]]) -> None:
    """The reference client against ``bench.null_server`` (answers from memory: no log, no
    fsync, no replication): the most any server could get out of that client on this
    machine, measured in the same run as the clusters it bounds. Same phases as a cluster
    round (128 in flight; the read of READ_TARGET entries, best of READS)."""
    with null_server(READ_TARGET, CEILING_BATCH) as url:
        phases = [updates_phase(128, dict(INFLIGHT)[128])] + [read_phase()] * READS
        [upd, *read_results] = run_phases([url], "null", phases)
    assert isinstance(upd, NodeUpdates)
    out["ceiling_rate128"].append(upd.rate)
    out["ceiling_cpu128"].append(upd.client_cpu)
    best = max((r for r in read_results if isinstance(r, NodeRead)), key=lambda r: r.rate)
    out["ceiling_read"].append(best.rate)
    out["ceiling_read_cpu"].append(best.client_cpu)


def _ceiling_text(ours: dict[str, list[float]], ref: dict[str, list[float]]) -> str:
    """What the client's ceiling says about the targets (3x updates, 2x reads)."""
    ceiling, ceiling_read = _med(ours["ceiling_rate128"]), _med(ours["ceiling_read"])
    ref128, ref_read = _med(ref["node_rate128"]), _med(ref["node_read"])
    return (
        "**The reference client's ceiling on this machine** (`bench/null_server.py`: a server"
        " that answers from memory, no log, no fsync, no replication; same phases, in this"
        f" run): {ceiling:,.0f} updates/s at 128 in flight (client CPU "
        + " / ".join(f"{v:.2f}" for v in ours["ceiling_cpu128"])
        + f"), reads {ceiling_read:,.0f} entries/s (client CPU "
        + " / ".join(f"{v:.2f}" for v in ours["ceiling_read_cpu"])
        + "); per round: "
        + " / ".join(_rate(v) for v in ours["ceiling_rate128"])
        + " updates/s, "
        + " / ".join(_rate(v) for v in ours["ceiling_read"])
        + f" entries/s. Three times the reference's 128-in-flight rate is {3 * ref128:,.0f}"
        f" updates/s = {3 * ref128 / ceiling:.2f} of this ceiling; twice its read rate is"
        f" {2 * ref_read:,.0f} entries/s = {2 * ref_read / ceiling_read:.2f} of it. raftlog"
        f" reaches {_med(ours['node_rate128']) / ceiling:.2f} and"
        f" {_med(ours['node_read']) / ceiling_read:.2f} of the ceiling, the reference"
        f" {ref128 / ceiling:.2f} and {ref_read / ceiling_read:.2f}."
    )


def _med(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def run() -> str:
    ours: dict[str, list[float]] = _series()
    ref: dict[str, list[float]] = _series()
    load_before = load_average()
    started = time.monotonic()
    floors: list[floor.Floor] = []
    for n in range(ROUNDS):
        for kind, series in (("reference", ref), ("raftlog", ours)):
            print(f"   round {n + 1}/{ROUNDS}: {kind}", flush=True)
            try:
                _one_round(kind, series)
            except RuntimeError as exc:  # three leader changes in a row: an overloaded machine
                out_notes[kind].append(f"round {n + 1} abandoned: {exc}")
        print(f"   round {n + 1}/{ROUNDS}: the client's ceiling (bench.null_server)", flush=True)
        _ceiling(ours)
        print(f"   round {n + 1}/{ROUNDS}: the floor (bench.floor)", flush=True)
        with tempfile.TemporaryDirectory(prefix="bench-floor-") as tmp:
            floors.append(floor.measure(Path(tmp)))  # the file system of the data directories
    _ours_on_a_million(ours)
    minutes = (time.monotonic() - started) / 60
    report = _report(ours, ref, load_before, load_average(), minutes, floor_text=floor.text(floors))
    print("\n".join(line for line in report.splitlines() if line.startswith("| ")), flush=True)
    return report


def _series() -> dict[str, list[float]]:
    return defaultdict(list)


def _rate(v: float) -> str:
    return f"{v:,.0f}"


def _ms(v: float) -> str:
    return f"{v:.2f} ms"


def _sec(v: float) -> str:
    return f"{v:.3f} s"


def _us(v: float) -> str:
    return f"{v:.2f} µs"


def _report(
    ours: dict[str, list[float]],
    ref: dict[str, list[float]],
    load_before: str,
    load_after: str,
    minutes: float,
    *,
    floor_text: str,
) -> str:
    def row(
        label: str, key: str, fmt: Callable[[float], str], higher_better: bool, client: str
    ) -> str:
        a, b = _med(ours[key]), _med(ref[key])
        ratio = a / b if higher_better else b / a
        return f"| {label} | {client} | {fmt(a)} | {fmt(b)} | **{ratio:.2f}x** |"

    def rounds(key: str) -> str:
        return (
            " / ".join(_rate(v) for v in ours[key])
            + " vs "
            + " / ".join(_rate(v) for v in ref[key])
        )

    def client_cpu(cpu_key: str, rate_key: str, digits: int) -> str:
        """Per round, both clusters: the client's CPU share and its µs per operation."""
        return ", ".join(
            name
            + " "
            + " / ".join(
                f"{c:.2f} ({c / r * 1e6:.{digits}f})"
                for c, r in zip(series[cpu_key], series[rate_key], strict=True)
            )
            for name, series in (("raftlog", ours), ("reference", ref))
        )

    node, py = "reference client", "loadgen.py"
    n = int(_med(ours["read_n"]))
    lines = [
        "## Cluster (three raftlog peers vs three reference zmq-raft peers)",
        "",
        "Two load generators drive both clusters: **the reference's own client**",
        "(`bench/reference_loadgen.js`: npm zmq-raft's `ZmqRaftClient`, one client, `in flight`",
        "async workers each awaiting its update) and `bench/loadgen.py` (one DEALER speaking the",
        "wire directly from Python). 100-byte RequestUpdates, fsync on; each round starts both",
        "clusters afresh, one after the other (never together: 2 cores), and runs the reference",
        f"client, then the Python generator, on the same cluster; medians of {ROUNDS} rounds,",
        "ratios from this run. 'better' = how many times raftlog is better (throughput:",
        "ours/ref; times and CPU: ref/ours). Reads: the whole log (~"
        f"{n:,} entries) from the leader, best of {READS} per round;",
        "*leader CPU per entry served* is the leader process's CPU time over the reads",
        "divided by the entries (hardly moved by other work on the machine).",
        "",
        "| measure | client | raftlog | reference | better |",
        "|---|---|---:|---:|---:|",
    ]
    for prefix, client in (("node_", node), ("", py)):
        for inflight, _ in INFLIGHT:
            lines.append(
                row(
                    f"updates/s, {inflight} in flight",
                    f"{prefix}rate{inflight}",
                    _rate,
                    True,
                    client,
                )
            )
            lines.append(
                row(
                    f"p50 latency, {inflight} in flight",
                    f"{prefix}p50_{inflight}",
                    _ms,
                    False,
                    client,
                )
            )
            lines.append(
                row(
                    f"p99 latency, {inflight} in flight",
                    f"{prefix}p99_{inflight}",
                    _ms,
                    False,
                    client,
                )
            )
    lines += [
        row("RequestEntries read, entries/s", "node_read", _rate, True, node),
        row("RequestEntries read, entries/s", "read", _rate, True, py),
        row("leader CPU per entry served (reads)", "read_leader_cpu", _us, False, "both"),
        row("CPU of all 3 peers per update, 128 in flight", "update_cpu", _us, False, py),
        row("leader CPU per update, 128 in flight", "node_leader_cpu", _us, False, node),
        row("leader CPU per update, 128 in flight", "leader_cpu", _us, False, py),
        row("kill -9 of the leader -> next committed update", "failover", _sec, False, py),
        row("restart of all 3 peers -> first committed update", "restart", _sec, False, py),
        "",
        "Per round (raftlog vs reference), to show the spread:",
        "",
        f"- updates/s at 128 in flight, reference client: {rounds('node_rate128')}",
        f"- updates/s at 128 in flight, loadgen.py: {rounds('rate128')}",
        "- the Node client's own CPU at 128 in flight (1.00 = a whole core; µs per update in"
        " brackets): " + client_cpu("node_client_cpu128", "node_rate128", 0),
        f"- read entries/s, reference client: {rounds('node_read')}",
        f"- read entries/s, loadgen.py: {rounds('read')}",
        "- the Node client's own CPU during its reads (1.00 = a whole core; µs per entry in"
        " brackets): " + client_cpu("node_read_client_cpu", "node_read", 2),
        "",
        _ceiling_text(ours, ref),
        "",
        floor_text,
        "",
        READ_NOTE,
        "",
        "Runs cut short by a leader change and retried on the new leader: raftlog "
        f"{len(out_notes['raftlog'])}, reference {len(out_notes['reference'])}"
        + "".join(f"; {k}: {n}" for k in out_notes for n in out_notes[k])
        + ". (The reference client rides out a leader change by itself; its figures then"
        " include the election.)",
        "",
        f"Load average (1/5/15 min) before the run {load_before}, after it {load_after}; "
        f"the run took {minutes:.1f} min.",
        "",
        "raftlog alone, one peer started on a 1,000,000-entry log (the reference needs 9.5 s",
        "at 158k entries, tests/interop/README.md; writing 1M entries through it takes too long",
        "here):",
        "",
        "| measure | seconds |",
        "|---|---:|",
        f"| start -> answers RequestLogInfo | {_med(ours['m_answer']):.3f} |",
        f"| start -> first committed update | {_med(ours['m_commit']):.3f} |",
    ]
    return "\n".join(lines) + "\n"
