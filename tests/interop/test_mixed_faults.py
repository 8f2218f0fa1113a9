"""Mixed clusters under random faults: raftlog and reference ``zmq-raft`` peers in one
configuration, the reference's own client committing updates the whole time, and a seeded
schedule of ``kill -9`` and ``SIGSTOP`` / ``SIGCONT`` aimed at peers of both kinds, the
leader among them.

Why, beside ``test_mixed_clusters.py``: that test kills the leader twice, at quiet moments;
here faults land while requests are in flight, on followers as well as leaders, and a paused
peer comes back believing what it believed before. The promises checked are the log's own
(``check_history``): every acknowledged update is in the log at the index it was
acknowledged with, exactly once, no request id appears twice, and every peer -- read with its
own implementation's storage code after a clean stop -- holds the same bytes.

``RAFTLOG_MIXED_FAULT_SECONDS`` (default 12) sets each run's fault phase and
``RAFTLOG_MIXED_FAULT_SEED`` its seed (default: from the clock, printed, so that a failing run
can be replayed); ``make chaos-mixed`` runs longer phases with several seeds.
"""

from __future__ import annotations

import os
import random
import signal
import time
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from interop_peers import (
    BackgroundUpdater,
    MixedCluster,
    no_leftover_processes,  # noqa: F401 - an autouse fixture: every peer is stopped
)

from raftlog.entry import EntryType, LogEntry

FAULT_SECONDS = float(os.environ.get("RAFTLOG_MIXED_FAULT_SECONDS", "12"))
pytestmark = pytest.mark.timeout(int(FAULT_SECONDS) + 300)
ACKS_BETWEEN_FAULTS = 5
"""New acknowledgements required after each fault is healed (liveness), before the next."""


@dataclass
class History:
    """What the client was told, and what the peers hold at the end."""

    acked: list[Mapping[str, Any]]
    """The reference client's acknowledgements: ``reqid`` (hex), ``index``, ``data`` (hex)."""
    logs: dict[str, list[bytes]]
    """Each peer's whole log (serialized entries, index 1 first), read from its storage."""


def check_history(history: History) -> list[str]:
    """Every broken promise in ``history``, as one line each (empty: all kept)."""
    problems: list[str] = []
    logs = history.logs
    reference_id, reference_log = next(iter(logs.items()))
    for peer_id, log in logs.items():
        if log != reference_log:
            first = next(
                (i for i, (a, b) in enumerate(zip(log, reference_log, strict=False)) if a != b),
                min(len(log), len(reference_log)),
            )
            problems.append(
                f"peer {peer_id} diverges from peer {reference_id} at index {first + 1} "
                f"({len(log)} against {len(reference_log)} entries)"
            )
    entries = [LogEntry.from_bytes(raw) for raw in reference_log]
    seen = Counter(e.request_id for e in entries if e.entry_type == EntryType.STATE)
    problems += [
        f"request id {rid.hex()} is in the log {n} times" for rid, n in seen.items() if n > 1
    ]
    for ack in history.acked:
        index, rid, data = (
            int(ack["index"]),
            bytes.fromhex(ack["reqid"]),
            bytes.fromhex(ack["data"]),
        )
        if not 1 <= index <= len(entries):
            problems.append(f"acknowledged {rid.hex()} at {index}, beyond the log's end")
            continue
        entry = entries[index - 1]
        if (entry.request_id, entry.data) != (rid, data):
            problems.append(
                f"acknowledged {rid.hex()} at {index}, which holds {entry.request_id.hex()}"
            )
    return problems


@dataclass
class Schedule:
    """The seeded faults: every third one aimed at the leader, the others at the peers in a
    shuffled cycle, so that a short run still hits both kinds of peer."""

    cluster: MixedCluster
    rng: random.Random
    did: Counter[str] = field(default_factory=Counter)
    _cycle: list[str] = field(default_factory=list)

    def victim(self, round_no: int) -> str:
        if round_no % 3 == 0:
            self.did["leader_faults"] += 1
            return self.cluster.wait_leader(timeout=30)
        if not self._cycle:
            self._cycle = self.cluster.ids
            self.rng.shuffle(self._cycle)
        return self._cycle.pop()

    def fault(self, round_no: int) -> None:
        """One fault, healed before it returns."""
        victim = self.victim(round_no)
        kind = self.cluster.kind(victim)
        if self.rng.random() < 0.5:
            self.cluster.kill(victim)
            time.sleep(self.rng.uniform(0.2, 1.0))
            self.cluster.start(victim)
            self.did[f"kills_{kind}"] += 1
        else:
            pid = self._pid(victim)
            os.kill(pid, signal.SIGSTOP)
            try:
                time.sleep(self.rng.uniform(0.3, 1.5))
            finally:
                os.kill(pid, signal.SIGCONT)
            self.did[f"pauses_{kind}"] += 1

    def _pid(self, peer_id: str) -> int:
        if self.cluster.kind(peer_id) == "reference":
            return self.cluster.reference.pid(peer_id)
        process = self.cluster.raftlog.peers[peer_id].process
        assert process is not None
        return process.pid


def run_mixed_faults(
    workdir: Path, ours: Sequence[str], refs: Sequence[str], seed: int, seconds: float
) -> tuple[History, Counter[str]]:
    """Start the cluster and the load, fault it for ``seconds``, heal, read every log."""
    rng = random.Random(seed)
    with MixedCluster(workdir, ours, refs) as cluster:
        try:
            cluster.start()
            cluster.wait_leader(timeout=30)
            load = BackgroundUpdater(
                workdir / "load", list(cluster.urls.values()), cluster.ident, timeout=seconds + 150
            )
            with load:
                load.wait_acked(ACKS_BETWEEN_FAULTS, timeout=30)
                schedule = Schedule(cluster, rng)
                deadline, round_no = time.monotonic() + seconds, 0
                while time.monotonic() < deadline or round_no < 3:
                    schedule.fault(round_no)
                    round_no += 1
                    load.wait_acked(len(load.progress()) + ACKS_BETWEEN_FAULTS, timeout=60)
                acked = load.finish(timeout=60)["acked"]
            cluster.wait_same_state(cluster.ids, max(int(a["index"]) for a in acked), 30)
            cluster.stop()
            logs = {pid: cluster.read_log_files(pid) for pid in cluster.ids}
        except BaseException:
            print(cluster.describe())
            raise
    return History(acked, logs), schedule.did


@pytest.fixture
def seed() -> Iterator[int]:
    value = int(os.environ.get("RAFTLOG_MIXED_FAULT_SEED", time.time_ns() % 1_000_000))
    print(f"RAFTLOG_MIXED_FAULT_SEED={value}")
    yield value


@pytest.mark.parametrize(
    ("ours", "refs"),
    [(["1", "2"], ["3"]), (["1"], ["2", "3"])],
    ids=["2-raftlog+1-reference", "1-raftlog+2-reference"],
)
def test_mixed_cluster_keeps_every_acknowledged_update_under_random_faults(
    reference_installed: Path, tmp_path: Path, seed: int, ours: list[str], refs: list[str]
) -> None:
    history, did = run_mixed_faults(tmp_path, ours, refs, seed, FAULT_SECONDS)
    print(f"faults: {dict(did)}; {len(history.acked)} acknowledged")
    assert did["leader_faults"] >= 1, did
    assert sum(n for k, n in did.items() if k.endswith("_reference")) >= 1, did
    assert sum(n for k, n in did.items() if k.endswith("_raftlog")) >= 1, did
    assert len(history.acked) >= ACKS_BETWEEN_FAULTS * 3
    assert check_history(history) == []


# -- the checker's negative controls (no cluster) -------------------------------------------


def _entry(n: int) -> bytes:
    return LogEntry(n.to_bytes(12, "big"), EntryType.STATE, 1, b"data-%d" % n).to_bytes()


def _acked(n: int, index: int | None = None) -> dict[str, Any]:
    return {
        "reqid": n.to_bytes(12, "big").hex(),
        "index": index or n,
        "data": (b"data-%d" % n).hex(),
    }


def test_the_checker_passes_a_true_history_and_names_every_broken_promise() -> None:
    log = [_entry(n) for n in range(1, 6)]
    good = History([_acked(n) for n in range(1, 6)], {"1": log, "2": list(log), "3": list(log)})
    assert check_history(good) == []
    lost = History(good.acked, {"1": log[:4], "2": log[:4], "3": log[:4]})
    assert check_history(lost) == [
        f"acknowledged {(5).to_bytes(12, 'big').hex()} at 5, beyond the log's end"
    ]
    moved = History([_acked(2, index=3)], good.logs)
    assert len(check_history(moved)) == 1 and "which holds" in check_history(moved)[0]
    twice = [*log, _entry(3)]
    assert check_history(History([], {"1": twice})) == [
        f"request id {(3).to_bytes(12, 'big').hex()} is in the log 2 times"
    ]
    diverged = [*log[:2], _entry(9), *log[3:]]
    assert check_history(History([], {"1": log, "2": diverged})) == [
        "peer 2 diverges from peer 1 at index 3 (5 against 5 entries)"
    ]
    shorter = History([], {"1": log, "2": log[:3]})
    assert check_history(shorter) == [
        "peer 2 diverges from peer 1 at index 4 (3 against 5 entries)"
    ]
