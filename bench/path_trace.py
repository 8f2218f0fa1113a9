"""The path of one committed update at 1 in flight, hop by hop, from the kernel's view of a
three-peer cluster driven by the reference's own client (issue #28; docs/performance.md
section 2).

Why this view: at one update in flight the latency is a chain -- the client's request, the
leader's pass, the AppendEntries, a follower's pass and fsync, its answer, the leader's
commit, the client's answer -- across seven threads in four processes on a machine where
they share two cores. A profiler of one process cannot say which link is long or whether a
link was waiting for a core. The kernel can: ``perf record -a`` of the scheduler's
switches and wake-ups and of the four system calls that mark the links (ZeroMQ's I/O
threads ``sendto`` and ``recvfrom`` each message; the peers ``fdatasync`` each synced
write) gives every link's wall time without touching the peers' code.

Each update is anchored at the client's ``sendto`` of its request and followed to the next
one: the leader's receive, the first AppendEntries on the wire, each follower's receive,
fsync and answer (the earlier answer is the one that commits), the leader's receive of it,
its answer on the wire and the client's receive. An update whose chain is incomplete (a
tick or a retransmission in between) is left out; the report says how many were kept.
For the three loop links it also says how long the loop thread ran and how long it was
runnable but waiting for a core, and per thread, over the whole window, its CPU and its
wait for a core per update.

Run: ``python -m bench.path_trace [--updates 5000] [--seconds 1.5] [--rounds 1]`` as root
or with ``kernel.perf_event_paranoid`` <= -1 (scheduler tracepoints), with ``perf``
installed and ``make install interop`` done (the reference client is Node's). Tracing every
scheduler event and these system calls slows the machine a little: compare links, not the
total, with an untraced run.
"""

from __future__ import annotations

import argparse
import bisect
import itertools
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "tests")]

from integration.cluster import PeerCluster  # noqa: E402

from bench.procstat import load_average  # noqa: E402
from bench.reference_client import node_command  # noqa: E402

EVENTS = (
    "sched:sched_switch",
    "sched:sched_wakeup",
    "syscalls:sys_enter_fdatasync",
    "syscalls:sys_exit_fdatasync",
    "syscalls:sys_enter_sendto",
    "syscalls:sys_exit_recvfrom",
)
"""What ``perf record`` traces: who runs and who wakes whom, the synced writes, and the
sends and (non-empty) receives of ZeroMQ's I/O threads."""

LINKS = (
    ("the request reaches the leader's I/O thread", "sent", "leader_rx"),
    ("the leader's pass: the AppendEntries on the wire", "leader_rx", "append_tx"),
    ("to the follower's I/O thread", "append_tx", "follower_rx"),
    ("the follower's pass up to its fsync", "follower_rx", "fsync_start"),
    ("the follower's fsync", "fsync_start", "fsync_end"),
    ("its answer on the wire", "fsync_end", "answer_tx"),
    ("back at the leader's I/O thread", "answer_tx", "answer_rx"),
    ("the leader's pass: commit, the client's answer on the wire", "answer_rx", "done_tx"),
    ("the answer reaches the client's I/O thread", "done_tx", "done_rx"),
    ("the client, to its next request", "done_rx", "next"),
)
"""(label, from, to): the links of one update's chain, in order."""

LOOP_LINKS = {"append_tx": "leader", "fsync_start": "follower", "done_tx": "leader"}
"""The links that end a loop thread's work (-> whose loop thread did it)."""

_LINE = re.compile(r"^\s*(.+?)\s+(\d+)/(\d+)\s+([\d.]+):\s+(\S+):\s*(.*)$")
_SWITCH = re.compile(r"prev_pid=(\d+) .*prev_state=(\S+) ==> .*next_pid=(\d+)")
_WAKEE = re.compile(r"\bpid=(\d+)")


@dataclass
class Trace:
    """One ``perf`` window: per thread, the times (µs) of each kind of event, its running
    and waiting intervals, and which process it belongs to."""

    events: dict[int, dict[str, list[float]]] = field(
        default_factory=lambda: defaultdict(lambda: defaultdict(list))
    )
    running: dict[int, list[tuple[float, float]]] = field(default_factory=lambda: defaultdict(list))
    waiting: dict[int, list[tuple[float, float]]] = field(default_factory=lambda: defaultdict(list))
    process: dict[int, int] = field(default_factory=dict)
    span: float = 0.0

    def first(self, tid: int, kind: str, after: float) -> float | None:
        """The first ``kind`` event of ``tid`` at or after ``after``."""
        times = self.events[tid][kind]
        at = bisect.bisect_left(times, after)
        return times[at] if at < len(times) else None

    def threads_of(self, pid: int) -> list[int]:
        """The threads of process ``pid`` seen in the window, the main thread first."""
        return sorted((t for t, p in self.process.items() if p == pid), key=lambda t: t != pid)

    def overlap(self, tid: int, kind: str, start: float, end: float) -> float:
        """How long ``tid`` was running (``kind`` "running") or runnable but not running
        ("waiting") within ``[start, end]``."""
        spans = self.running[tid] if kind == "running" else self.waiting[tid]
        at = max(0, bisect.bisect_left(spans, (start,)) - 1)
        total = 0.0
        for begin, finish in spans[at:]:
            if begin > end:
                break
            total += max(0.0, min(end, finish) - max(start, begin))
        return total


def parse(text: str) -> Trace:
    """Build a ``Trace`` from ``perf script -F comm,pid,tid,time,event,trace`` output."""
    trace = Trace()
    scheduler = _Scheduler(trace)
    first = last = None
    for line in text.splitlines():
        match = _LINE.match(line)
        if match is None:
            continue
        _, pid, tid, stamp, event, detail = match.groups()
        now, thread = float(stamp) * 1e6, int(tid)
        first = now if first is None else first
        last = now
        trace.process[thread] = int(pid)
        if event.startswith("sched:"):
            scheduler.step(event, detail, now)
        else:
            _syscall(trace.events[thread], event, detail, now)
    trace.span = (last or 0.0) - (first or 0.0)
    return trace


class _Scheduler:
    """Follows which threads run and which wait for a core, into a ``Trace``."""

    def __init__(self, trace: Trace) -> None:
        self.trace = trace
        self.on_cpu: dict[int, float] = {}
        self.runnable: dict[int, float] = {}

    def step(self, event: str, detail: str, now: float) -> None:
        if event == "sched:sched_wakeup":
            wakee = _WAKEE.search(detail)
            if wakee is not None and int(wakee[1]) not in self.on_cpu:
                self.runnable.setdefault(int(wakee[1]), now)
            return
        switch = _SWITCH.search(detail)
        if switch is None:
            return
        out, state, into = int(switch[1]), switch[2], int(switch[3])
        if out in self.on_cpu:
            self.trace.running[out].append((self.on_cpu.pop(out), now))
        if state.startswith("R"):  # preempted: still runnable
            self.runnable[out] = now
        if into == 0:  # a core goes idle (each core has an idle task of pid 0)
            return
        if into in self.runnable:
            self.trace.waiting[into].append((self.runnable.pop(into), now))
        self.on_cpu[into] = now


def _syscall(events: dict[str, list[float]], event: str, detail: str, now: float) -> None:
    if event.endswith("sendto"):
        events["send"].append(now)
    elif event.endswith("recvfrom"):
        returned = int(detail.strip(), 16)
        if 0 < returned < 1 << 32:  # not an error (EAGAIN comes back as a huge value)
            events["recv"].append(now)
    elif event.endswith("enter_fdatasync"):
        events["fsync_start"].append(now)
    elif event.endswith("exit_fdatasync"):
        events["fsync_end"].append(now)


@dataclass(frozen=True)
class Roles:
    """Which thread is which: the client's and each peer's I/O threads, by what they do."""

    client: int
    client_io: int
    leader: int
    leader_clients_io: int
    leader_peers_io: int
    followers: dict[int, int]
    """Follower main thread -> its I/O thread."""


def _io_threads(trace: Trace, pid: int) -> list[int]:
    return [t for t in trace.threads_of(pid) if t != pid and trace.events[t]["send"]]


def _follows(trace: Trace, tid: int, kind: str, anchors: list[float], within: float) -> int:
    """How many ``anchors`` are followed by a ``kind`` event of ``tid`` within ``within`` µs."""
    count = 0
    for anchor in anchors:
        at = trace.first(tid, kind, anchor)
        count += at is not None and at - anchor <= within
    return count


def roles(trace: Trace, client: int, leader: int, followers: list[int]) -> Roles:
    """Tell the threads apart: the client's I/O thread sends most; the leader's I/O thread
    for clients is the one that receives right after the client sends; the other serves
    the peer channels (their own ZeroMQ context, issue #25)."""
    client_io = max(_io_threads(trace, client), key=lambda t: len(trace.events[t]["send"]))
    sends = trace.events[client_io]["send"]
    ios = _io_threads(trace, leader)
    clients_io = max(ios, key=lambda t: _follows(trace, t, "recv", sends, 200.0))
    peers_io = max((t for t in ios if t != clients_io), key=lambda t: len(trace.events[t]["send"]))
    return Roles(
        client,
        client_io,
        leader,
        clients_io,
        peers_io,
        {
            f: max(_io_threads(trace, f), key=lambda t: len(trace.events[t]["send"]))
            for f in followers
        },
    )


def chains(trace: Trace, who: Roles) -> list[dict[str, float]]:
    """Each complete update's chain: event name -> time (µs after its request was sent),
    plus ``loop:<link>`` and ``wait:<link>`` for the loop links (running / waiting for a
    core)."""
    sends = trace.events[who.client_io]["send"]
    out = []
    for sent, following in itertools.pairwise(sends):
        chain = _chain(trace, who, sent, following)
        if chain is not None:
            out.append(chain)
    return out


def _chain(trace: Trace, who: Roles, sent: float, following: float) -> dict[str, float] | None:
    never = float("inf")
    at: dict[str, float] = {"sent": sent, "next": following}
    at["leader_rx"] = trace.first(who.leader_clients_io, "recv", sent) or never
    at["append_tx"] = trace.first(who.leader_peers_io, "send", at["leader_rx"]) or never
    best: tuple[float, ...] | None = None
    for follower, io in who.followers.items():
        received = trace.first(io, "recv", at["append_tx"]) or never
        started = trace.first(follower, "fsync_start", received) or never
        ended = trace.first(follower, "fsync_end", started) or never
        answered = trace.first(io, "send", ended) or never
        candidate = (answered, received, started, ended, follower)
        if best is None or candidate < best:
            best = candidate
    assert best is not None
    at["answer_tx"], at["follower_rx"], at["fsync_start"], at["fsync_end"], busy = best
    at["answer_rx"] = trace.first(who.leader_peers_io, "recv", at["answer_tx"]) or never
    at["done_tx"] = trace.first(who.leader_clients_io, "send", at["answer_rx"]) or never
    at["done_rx"] = trace.first(who.client_io, "recv", at["done_tx"]) or never
    order = [at[name] for _, name, _ in LINKS] + [following]
    if any(b < a for a, b in itertools.pairwise(order)) or max(order) > following:
        return None
    chain = {name: at[name] - sent for name in at}
    for _, start, end in LINKS:
        owner = LOOP_LINKS.get(end)
        if owner is not None:
            thread = who.leader if owner == "leader" else int(busy)
            chain[f"loop:{end}"] = trace.overlap(thread, "running", at[start], at[end])
            chain[f"wait:{end}"] = trace.overlap(thread, "waiting", at[start], at[end])
    return chain


def _median_p90(values: list[float]) -> tuple[float, float]:
    ordered = sorted(values)
    return statistics.median(ordered), ordered[int(len(ordered) * 0.9)]


def report(trace: Trace, who: Roles, kept: list[dict[str, float]]) -> str:
    """The links' table, then the threads' CPU and wait per update."""
    updates = len(trace.events[who.client_io]["send"])
    if not kept:
        return f"none of {updates} updates had a complete chain (was perf tracing the run?)"
    lines = [
        f"{len(kept)} of {updates} updates in {trace.span / 1e3:.0f} ms with a complete chain",
        "",
        "| link | median µs | p90 µs | the loop thread ran / waited for a core (medians) |",
        "|---|---:|---:|---|",
    ]
    for label, start, end in LINKS:
        median, p90 = _median_p90([c[end] - c[start] for c in kept])
        loop = ""
        if end in LOOP_LINKS:
            ran = statistics.median(c[f"loop:{end}"] for c in kept)
            waited = statistics.median(c[f"wait:{end}"] for c in kept)
            loop = f"{ran:.0f} / {waited:.0f}"
        lines.append(f"| {label} | {median:.0f} | {p90:.0f} | {loop} |")
    median, p90 = _median_p90([c["done_rx"] for c in kept])
    lines.append(f"| **request sent -> answer received** | **{median:.0f}** | {p90:.0f} | |")
    leader_syncs = [
        finish - begin
        for begin in trace.events[who.leader]["fsync_start"]
        if (finish := trace.first(who.leader, "fsync_end", begin)) is not None
    ]
    if leader_syncs:
        median, p90 = _median_p90(leader_syncs)
        lines.append(f"| the leader's own fsync (in parallel) | {median:.0f} | {p90:.0f} | |")
    lines += [
        "",
        "| thread | CPU µs per update | waiting for a core µs per update |",
        "|---|---:|---:|",
    ]
    names = _thread_names(who)
    for tid, name in names.items():
        ran = sum(end - start for start, end in trace.running[tid]) / updates
        waited = sum(end - start for start, end in trace.waiting[tid]) / updates
        lines.append(f"| {name} | {ran:.0f} | {waited:.0f} |")
    busy = sum(end - start for tid, spans in trace.running.items() for start, end in spans)
    idle = ((os.cpu_count() or 1) * trace.span - busy) / updates
    lines.append(f"| (nothing running, all cores) | {idle:.0f} | |")
    return "\n".join(lines)


def _thread_names(who: Roles) -> dict[int, str]:
    names = {
        who.client: "client (Node)",
        who.client_io: "client's ZeroMQ I/O thread",
        who.leader: "leader loop",
        who.leader_clients_io: "leader's I/O thread (clients)",
        who.leader_peers_io: "leader's I/O thread (peers)",
    }
    for n, (follower, io) in enumerate(sorted(who.followers.items()), start=1):
        names[follower] = f"follower {n} loop"
        names[io] = f"follower {n}'s I/O thread"
    return names


def one_round(updates: int, seconds: float, workdir: Path) -> str:
    """A fresh cluster, the reference client at 16 in flight (warm-up) then 1 in flight;
    ``perf`` records ``seconds`` in the middle of the second phase."""
    with PeerCluster(workdir) as cluster:
        cluster.start()
        leader_id = cluster.wait_stable_leader()
        pids = {pid: p.process.pid for pid, p in cluster.peers.items() if p.process}
        phases = [
            {"kind": "updates", "inflight": 16, "total": 2000, "size": 100},
            {"kind": "updates", "inflight": 1, "total": updates, "size": 100},
        ]
        command, env = node_command(cluster.urls, cluster.ident, phases)
        with subprocess.Popen(command, stdout=subprocess.DEVNULL, env=env) as client:
            time.sleep(2.0)  # start-up, leader discovery and the warm-up phase
            data = workdir / "perf.data"
            record = ["perf", "record", "-q", "-a", "-o", str(data)]
            for event in EVENTS:
                record += ["-e", event]
            subprocess.run([*record, "--", "sleep", str(seconds)], check=True, capture_output=True)
            if client.wait(timeout=600) != 0:
                raise RuntimeError("the reference client failed")
        text = subprocess.run(
            ["perf", "script", "-i", str(data), "-F", "comm,pid,tid,time,event,trace"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
    trace = parse(text)
    leader = pids[leader_id]
    followers = [pid for peer, pid in pids.items() if peer != leader_id]
    who = roles(trace, client.pid, leader, followers)
    return report(trace, who, chains(trace, who))


def main(argv: list[str]) -> None:
    """Parse the options, check for ``perf``, run the rounds, print a table per round."""
    parser = argparse.ArgumentParser(prog="python -m bench.path_trace", description=__doc__)
    parser.add_argument("--updates", type=int, default=5000, help="updates at 1 in flight")
    parser.add_argument("--seconds", type=float, default=1.5, help="how long perf records")
    parser.add_argument("--rounds", type=int, default=1)
    args = parser.parse_args(argv)
    if shutil.which("perf") is None:
        sys.exit("path_trace needs perf (Debian: apt-get install linux-perf)")
    print(f"load average before: {load_average()}", flush=True)
    for n in range(args.rounds):
        with tempfile.TemporaryDirectory() as tmp:
            print(f"\nround {n + 1}\n\n{one_round(args.updates, args.seconds, Path(tmp))}")
    print(f"\nload average after: {load_average()}")


if __name__ == "__main__":
    main(sys.argv[1:])
