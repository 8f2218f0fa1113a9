"""Clock-fault schedules (issue #24): one peer's wall clock steps forward or back by 1 h or
9 h while writers retry with the same request ids, a topic with short retention holds records
and a transaction is open. The monotonic clock is untouched, as with NTP (``faults.wallclock``).

Besides the history checker (0 lost, 0 duplicated, reads = log), each run counts what time
could break and the test asserts it is zero:

* ``expired_early``: records of the 10-minute-retention topic no longer readable on some peer
  although far younger than 10 minutes by true time;
* ``tx_expired_early``: the open transaction (120-s timeout) refused at commit although less
  than ``120 s / (1 + SLEW)`` of true time passed since it began;
* ``clock_off_ms``: how far the log clock ended up from true time: at most the slew (10%)
  of the time the clocks were stepped (``stepped_ms``) plus 2 s.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from faults.cluster import IDENT, FaultCluster
from faults.harness import Chaos
from faults.wallclock import HOUR, WallClocks, require_offset
from raftlog.cluster_clock import SLEW
from raftlog.errors import TransactionError
from raftlog.topics.sync_client import SyncTopicClient

STEPS = (HOUR, -HOUR, 9 * HOUR, -9 * HOUR)
RETENTION_MS = 10 * 60_000
TX_TIMEOUT_S = 120
RECORDS = 30
CLOCK_TOPIC = "clocked"


def clock_entry(data: bytes) -> bool:
    """Is this entry data one of the schedule's own proposals (its topic, its transaction)?"""
    return CLOCK_TOPIC.encode() in data  # the topic name and the transaction id hold it


def clock_setup(cluster: FaultCluster) -> None:
    """Every peer gets a steppable wall clock (before it starts)."""
    clocks = WallClocks(cluster.directory)
    for peer_id in cluster.ids:
        cluster.peers.peers[peer_id].env.update(clocks.env(peer_id))


def _step_loop(chaos: Chaos, pick: Callable[[Chaos], str]) -> None:
    clocks = WallClocks(chaos.cluster.directory)
    began = time.monotonic()
    with SyncTopicClient(chaos.cluster.urls, IDENT, timeout=20) as topics:
        topics.create_topic(CLOCK_TOPIC, retention_ms=RETENTION_MS, exist_ok=True)
        ids = [topics.publish(CLOCK_TOPIC, b"c%03d" % n) for n in range(RECORDS)]
        tx = topics.begin_transaction(timeout=TX_TIMEOUT_S, txid=f"{CLOCK_TOPIC}-tx")
        tx_began = time.monotonic()
        tx.publish(CLOCK_TOPIC, b"transactional")
        while chaos.running():
            victim = pick(chaos)
            offset = chaos.rng.choice(STEPS)
            clocks.step(victim, offset)
            if not chaos.did["clock_steps"]:  # the fault really happened (the shim loaded)
                url = chaos.cluster.direct_url(victim)
                require_offset(chaos.cluster.urls, IDENT, url, offset)
            chaos.did["clock_steps"] += 1
            chaos.did[f"step_{int(offset // HOUR):+d}h"] += 1
            # seconds in make test; up to a minute in longer chaos runs
            stepped_at = time.monotonic()
            chaos.pause_for(chaos.rng.uniform(1.0, max(3.0, min(60.0, chaos.left() / 2))))
            clocks.step(victim, 0)
            chaos.did["stepped_ms"] += int((time.monotonic() - stepped_at) * 1000)
            chaos.wait_acks(5)
        try:
            tx.commit()
        except TransactionError:
            if time.monotonic() - tx_began < TX_TIMEOUT_S / (1 + SLEW):
                chaos.did["tx_expired_early"] += 1
        for peer_id in chaos.members:
            page = topics.read(CLOCK_TOPIC, url=chaos.cluster.direct_url(peer_id))
            have = {r.id for r in page.records}
            if time.monotonic() - began < RETENTION_MS / 1000 / (1 + SLEW):
                chaos.did["expired_early"] += sum(1 for rid in ids if rid not in have)
            clock_ms = topics.describe(CLOCK_TOPIC, url=chaos.cluster.direct_url(peer_id))
            off = abs(clock_ms.log_clock_ms - time.time() * 1000)
            chaos.did["clock_off_ms"] = max(chaos.did["clock_off_ms"], int(off))


def clock_step_leader(chaos: Chaos) -> None:
    """Step the leader's wall clock by +-1 h or +-9 h for a while, then back; repeat."""
    _step_loop(chaos, lambda c: c.leader())


def clock_step_follower(chaos: Chaos) -> None:
    """The same on a follower (which may lead later: it must not carry its clock in)."""
    _step_loop(chaos, lambda c: c.rng.choice([p for p in c.members if p != c.leader()]))


CLOCK_OFF_MARGIN_MS = 2_000
"""Beyond the slew bound (10% of the time the clocks were stepped): stamping and apply lag."""


def time_problems(did: dict[str, int]) -> list[str]:
    """What a run broke that only time could break (empty for schedules without clocks)."""
    out = [f"{key}={did[key]}" for key in ("expired_early", "tx_expired_early") if did.get(key)]
    limit = CLOCK_OFF_MARGIN_MS + SLEW * did.get("stepped_ms", 0)
    if did.get("clock_off_ms", 0) > limit:
        out.append(f"log clock {did['clock_off_ms']} ms off true time (limit {limit:.0f})")
    return out
