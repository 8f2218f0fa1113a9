"""``raftlog-admin bench``: a short publish/read benchmark against any cluster (like
``nats bench``), printing rates and latency percentiles.

Why: "is this cluster as fast as it should be?" is the first question after an install or
an incident, and answering it should not need the repository's ``bench/`` suites. It
publishes ``--count`` updates of ``--size`` bytes with ``--in-flight`` outstanding on one
client (each latency is one RequestUpdate to its final answer: replicated to a majority,
fsynced and applied), then reads them back with one RequestEntries stream.

It **writes into the log** of the cluster it is pointed at (``bench`` entries of plain
data); run it against a test cluster, or accept the entries (``compact`` drops them later).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import time

from raftlog.cli.admin_io import EXIT_OK, UsageError, say, subcommand
from raftlog.client import RaftClient
from raftlog.client.models import IndexedEntry


def percentile(sorted_values: list[float], fraction: float) -> float:
    """The value below which ``fraction`` of ``sorted_values`` lie (nearest rank)."""
    if not sorted_values:
        return 0.0
    rank = min(len(sorted_values) - 1, max(0, round(fraction * len(sorted_values)) - 1))
    return sorted_values[rank]


async def _publish(client: RaftClient, count: int, size: int, in_flight: int) -> tuple[
    float, list[float], int
]:
    """(seconds, sorted latencies in seconds, first index written)."""
    payload = b"bench " + os.urandom(max(0, size - 6) // 2).hex().encode()
    payload = payload[:size].ljust(size, b".")
    latencies: list[float] = []
    indexes: list[int] = []
    next_n = 0

    async def worker() -> None:
        nonlocal next_n
        while next_n < count:
            next_n += 1
            started = time.perf_counter()
            indexes.append(await client.request_update(payload))
            latencies.append(time.perf_counter() - started)

    started = time.perf_counter()
    async with asyncio.TaskGroup() as group:
        for _ in range(min(in_flight, count)):
            group.create_task(worker())
    return time.perf_counter() - started, sorted(latencies), min(indexes)


async def _read(client: RaftClient, first: int, count: int) -> tuple[float, int]:
    """(seconds, entries read) for ``count`` entries from ``first``."""
    started = time.perf_counter()
    read = 0
    async for item in client.request_entries(first - 1, count):
        if isinstance(item, IndexedEntry):
            read += 1
    return time.perf_counter() - started, read


async def cmd_bench(args: argparse.Namespace, client: RaftClient) -> int:
    """Publish, then read back; one report (text or ``-o json``)."""
    if args.count < 1 or args.size < 1 or args.in_flight < 1:
        raise UsageError("bench: --count, --size and --in-flight must be at least 1")
    client.check_entry_size(b"x" * args.size)
    await client.request_config()  # the leader first: a down cluster fails before timing
    seconds, lat, first = await _publish(client, args.count, args.size, args.in_flight)
    read_seconds, read = await _read(client, first, args.count)
    ms = {f"p{int(q * 100)}": percentile(lat, q) * 1000 for q in (0.5, 0.9, 0.99)}
    ms["max"] = lat[-1] * 1000
    ms["mean"] = statistics.fmean(lat) * 1000
    rate = args.count / seconds
    read_rate = read / read_seconds if read_seconds > 0 else 0.0
    text = (
        f"publish: {args.count} x {args.size} B, {args.in_flight} in flight: "
        f"{rate:,.0f} msg/s ({rate * args.size / 1e6:.2f} MB/s) in {seconds:.2f} s\n"
        f"latency ms: p50 {ms['p50']:.2f}  p90 {ms['p90']:.2f}  p99 {ms['p99']:.2f}  "
        f"max {ms['max']:.2f}  mean {ms['mean']:.2f}\n"
        f"read: {read} entries in {read_seconds:.2f} s: {read_rate:,.0f} msg/s"
    )
    say(args, text, publish={"count": args.count, "size": args.size,
                             "in_flight": args.in_flight, "seconds": seconds,
                             "msgs_per_s": rate, "latency_ms": ms},
        read={"count": read, "seconds": read_seconds, "msgs_per_s": read_rate})
    return EXIT_OK


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``bench``."""
    bench = subcommand(
        sub,
        "bench",
        "a short publish/read benchmark: rates and latency percentiles (writes into the log)",
        "  raftlog-admin bench\n  raftlog-admin bench --count 20000 --size 1024 --in-flight 128\n",
    )
    bench.add_argument("--count", type=int, default=5000, help="updates to publish (5000)")
    bench.add_argument("--size", type=int, default=100, help="bytes per update (100)")
    bench.add_argument("--in-flight", type=int, default=64, help="outstanding updates (64)")
