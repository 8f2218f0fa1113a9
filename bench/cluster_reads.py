"""The read part of the cluster benchmark (``bench/bench_cluster.py``): how big the log is
when it is read, how it is read with each client, and what the report says about it.

Kept apart so the cluster benchmark stays readable; everything here is used by it only.
"""

from __future__ import annotations

import statistics
from typing import Any

from bench.loadgen import on_leader_retrying, read_entries, run_updates
from bench.procstat import cpu_seconds
from bench.reference_client import NodeRead, read_phase, run_phases

READ_TARGET = 300_000
"""Entries in the log when it is read (topped up with 100-byte updates, the same count for both
clusters). 300k, not 100k: a 100k read lasted ~0.12 s, so the start of the stream (the first
round trip, the Node client's JIT warming up) and a single descheduling on a shared machine
weighed on it; ~0.3-0.5 s reads are steadier. Filling the extra 200k costs ~20-30 s a round."""
READS = 2
FILL_CHUNK = 25_000
"""Updates per call while filling: a leader change then costs one chunk's retry, not the
round (on a loaded machine raftlog clusters changed leader during a 230k fill at 128 in
flight often enough to abandon whole rounds after three cut-short attempts)."""
CEILING_BATCH = 1070
"""Entries per RequestEntries batch of the null server: raftlog's (128 KiB of 100 B entries).
The Node client costs least per entry at 1,000-2,000 frames per message; at 500 it measured
1.60 against 1.06 µs per entry (medians of 9 reads, 2026-11-24), which put the ceiling too low
(docs/performance.md, Reads)."""


def fill(c: Any, written: int, notes: list[str]) -> None:
    """Top the log up from ``written`` to ``READ_TARGET`` entries with 100-byte updates at 128
    in flight, ``FILL_CHUNK`` at a time. A chunk cut short by a leader change is sent again
    whole on the new leader, so the log may end a little longer than the target (the
    acknowledged part of the cut chunk); rates are per entry read, whatever the count."""
    while written < READ_TARGET:
        n = min(FILL_CHUNK, READ_TARGET - written)
        on_leader_retrying(
            c.urls,
            c.ident,
            lambda url, n=n: run_updates(url, c.ident, inflight=128, total=n),
            notes,
            "filling the log",
        )
        written += n


def reads(c: Any, out: dict[str, list[float]], notes: list[str]) -> None:
    """The whole log read with each client, ``READS`` times (best kept: a read lasts a
    fraction of a second, so one descheduling by other work on the machine shows), and the
    leader's CPU per entry it served (a figure the machine's load hardly moves)."""
    node_best = py_best = 0.0
    node_cpu: list[float] = []
    py_cpu: list[float] = []
    client_cpu = 0.0
    for _ in range(READS):
        cpu = cpu_seconds(c.leader_pid())
        [r] = run_phases(c.urls, c.ident, [read_phase()])
        assert isinstance(r, NodeRead)
        node_cpu.append((cpu_seconds(c.leader_pid()) - cpu) / r.entries * 1e6)
        if r.rate > node_best:
            node_best, client_cpu = r.rate, r.client_cpu
        cpu = cpu_seconds(c.leader_pid())
        entries, seconds = on_leader_retrying(
            c.urls, c.ident, lambda url: read_entries(url, c.ident), notes, "loadgen.py read"
        )
        py_cpu.append((cpu_seconds(c.leader_pid()) - cpu) / entries * 1e6)
        py_best = max(py_best, entries / seconds)
    out["node_read"].append(node_best)
    out["node_read_client_cpu"].append(client_cpu)
    out["read"].append(py_best)
    out["read_n"].append(entries)
    # The Node client's read includes its process start-up in the leader's CPU window only
    # as idle time; the leader's own CPU per entry is the same either way.
    out["read_leader_cpu"].append(statistics.median(node_cpu + py_cpu))


READ_NOTE = (
    "What sets the read rate (docs/performance.md, Reads; 2026-11-24): with the reference's"
    " Node client, the client itself (its ceiling is above): zeromq.js 5 makes every frame an"
    " external Buffer (a malloc, a persistent handle, a finalizer for the garbage collector),"
    " ~1 µs of client CPU per entry whichever server answers. The leader's share per entry:"
    " the RocksDB iterator ~0.2 µs, the stored CRC check ~0.3 µs (kept: it catches a record"
    " under the wrong key or a bit flipped in memory, which RocksDB's block checksums do"
    " not), the pyzmq send ~0.15 µs per frame plus its ZeroMQ I/O thread (one frame per entry,"
    " as the protocol requires). raftlog's batches hold up to 128 KiB / 2,048 entries (the"
    " reference's 64 KiB / 4,096): the fixed cost of a batch on both sides is spread over"
    " ~1,070 entries of 100 B instead of ~540. The reference's rate is set by its server"
    " (~1.4-1.5 µs of leader CPU per entry)."
)
