"""Key-value benchmark (issue #29): put and get rates on a compacted topic.

On a fresh three-peer cluster, a topic with ``cleanup_policy = compact``:

- put: ``PUTS`` puts over ``KEYS`` keys of ``VALUE`` bytes, ``IN_FLIGHT`` outstanding (each
  put one durable, majority-committed entry that also updates the topic machine's key
  store on every peer), puts/s; then the same with ``expect_revision`` (compare-and-set on
  each key's current revision: one writer per key, so every one succeeds), puts/s;
- get: ``GETS`` ``KG`` gets of random existing keys from the leader and from a follower,
  ``IN_FLIGHT`` outstanding, gets/s;
- keys: one full ``KK`` listing of every key, keys/s.

Sizes come from the environment so a busy machine can check that it runs
(``RAFTLOG_BENCH_KV_PUTS``, ``RAFTLOG_BENCH_KV_GETS``, ``RAFTLOG_BENCH_ROUNDS``); the
defaults finish well within 4 minutes on a quiet machine.
"""

from __future__ import annotations

import asyncio
import os
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "tests")]

from integration.cluster import PeerCluster  # noqa: E402

from bench.procstat import load_average  # noqa: E402
from raftlog.client import RaftClient  # noqa: E402
from raftlog.topics.client import TopicClient  # noqa: E402
from raftlog.topics.records import RecordId  # noqa: E402

RUNS = int(os.environ.get("RAFTLOG_BENCH_ROUNDS", "3"))
PUTS = int(os.environ.get("RAFTLOG_BENCH_KV_PUTS", "5000"))
GETS = int(os.environ.get("RAFTLOG_BENCH_KV_GETS", "10000"))
KEYS = 1000
VALUE = 100
IN_FLIGHT = 32
TOPIC = "kv"


async def _rate(count: int, one: Callable[[int], Awaitable[object]]) -> float:
    """Operations per second of ``count`` calls of ``one(n)``, ``IN_FLIGHT`` at a time."""
    queue: asyncio.Queue[int] = asyncio.Queue()
    for n in range(count):
        queue.put_nowait(n)

    async def worker() -> None:
        while not queue.empty():
            await one(queue.get_nowait())

    t0 = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(IN_FLIGHT)))
    return count / (time.perf_counter() - t0)


async def _round(out: dict[str, list[float]]) -> None:
    with tempfile.TemporaryDirectory(prefix="bench-kv-") as tmp, PeerCluster(Path(tmp)) as c:
        c.start()
        leader_id = c.wait_stable_leader()
        follower = next(p.url for i, p in c.peers.items() if i != leader_id)
        async with RaftClient(c.urls, c.ident, timeout=60) as client, TopicClient(client) as tc:
            await tc.create_topic(TOPIC, properties={"cleanup_policy": "compact"})
            kv = tc.kv
            value = b"v" * VALUE
            out["put"].append(
                await _rate(PUTS, lambda n: kv.put(TOPIC, b"key-%04d" % (n % KEYS), value))
            )
            revisions: dict[bytes, RecordId] = dict(await kv.keys(TOPIC))
            slots = [list(revisions)[k::IN_FLIGHT] for k in range(IN_FLIGHT)]

            async def cas(n: int) -> None:
                key = slots[n % IN_FLIGHT][(n // IN_FLIGHT) % len(slots[n % IN_FLIGHT])]
                revisions[key] = await kv.put(TOPIC, key, value, expect_revision=revisions[key])

            # one worker per slot of keys: no two in-flight puts expect the same key
            out["cas"].append(await _cas_rate(cas))
            keys = list(revisions)
            rng = random.Random(1)
            for name, url in (("get_leader", None), ("get_follower", follower)):
                out[name].append(
                    await _rate(GETS, lambda _n, u=url: kv.get(TOPIC, rng.choice(keys), url=u))
                )
            t0 = time.perf_counter()
            listed = await kv.keys(TOPIC)
            out["keys"].append(len(listed) / (time.perf_counter() - t0))


async def _cas_rate(cas: Callable[[int], Awaitable[None]]) -> float:
    per_worker = max(1, PUTS // IN_FLIGHT)

    async def worker(slot: int) -> None:
        for k in range(per_worker):
            await cas(slot + k * IN_FLIGHT)

    t0 = time.perf_counter()
    await asyncio.gather(*(worker(slot) for slot in range(IN_FLIGHT)))
    return per_worker * IN_FLIGHT / (time.perf_counter() - t0)


def run() -> str:
    out: dict[str, list[float]] = {
        k: [] for k in ("put", "cas", "get_leader", "get_follower", "keys")
    }
    load_before = load_average()
    for n in range(RUNS):
        print(f"   round {n + 1}/{RUNS}", flush=True)
        asyncio.run(_round(out))
    med = {k: statistics.median(v) for k, v in out.items()}
    return "\n".join(
        [
            "## Key-value view (compacted topics)",
            "",
            f"Three raftlog peers; medians of {RUNS} rounds. A topic with `cleanup_policy = "
            f"compact`, {KEYS:,} keys, values of {VALUE} B, {IN_FLIGHT} requests in flight.",
            "Every put is one durable, majority-committed entry; gets are `KG` answered from",
            "the asked peer's applied state.",
            "",
            "| measure | value |",
            "|---|---:|",
            f"| put ({PUTS:,} puts), puts/s | {med['put']:,.0f} |",
            f"| put with expect_revision (compare-and-set), puts/s | {med['cas']:,.0f} |",
            f"| get from the leader ({GETS:,} gets), gets/s | {med['get_leader']:,.0f} |",
            f"| get from a follower, gets/s | {med['get_follower']:,.0f} |",
            f"| keys: one listing of all {KEYS:,} keys, keys/s | {med['keys']:,.0f} |",
            "",
            f"Load average (1/5/15 min) before {load_before}, after {load_average()}.",
        ]
    )


if __name__ == "__main__":
    print(run())
