"""``make stability``: elections while a healthy leader exists, under load and a CPU hog.

No fault is injected: every election in the window is spurious (the leader process runs and
is reachable the whole time). A busy process is pinned to one core, the workload of the
fault schedules writes and publishes, and at the end the peers are stopped cleanly so that
each logs ``peer_stopping`` with ``max_loop_stall_ms`` (when the peer exposes it: the loop
stall metric of issue #12). Prints a Markdown block; with ``RAFTLOG_STABILITY_DOC`` (default
docs/reliability.md, ``-`` to only print) it replaces the block between the
``stability-table`` markers there.

Besides elections: the longest loop pass (``max_loop_stall_ms``), the longest gap between
two passes (``max_loop_gap_ms``: includes time the peer was not scheduled at all), the
longest garbage collection, and how many candidacies there were (a candidacy that elects
nobody still raises the term).

Environment: ``RAFTLOG_STABILITY_SECONDS`` (300), ``RAFTLOG_STABILITY_HOG`` (1: a hog on
core 0; 0: no hog, for a baseline), ``RAFTLOG_STABILITY_KEEP`` (a directory: keep the peers'
logs there), ``RAFTLOG_STABILITY_REQUEST_ID_TTL_MS`` (compaction under way, see
``raft_options``), and ``RAFTLOG_STALL_STACKS_MS`` reaches the peers (their loop's stack is logged
when a pass runs longer, ``raftlog.server.stall_watch``).
"""

from __future__ import annotations

import faulthandler
import os
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

from integration.cluster import wait_for

from faults.chaos import load, load_note, machine, write_doc
from faults.cluster import IDENT, FaultCluster
from faults.workload import Workload, max_unavailability


def raft_options() -> dict[str, object]:
    """The peers' defaults, unless ``RAFTLOG_STABILITY_REQUEST_ID_TTL_MS`` asks for compaction
    under way (a bounded request-id TTL and a 20,000-entry threshold, as the soak's)."""
    ttl = os.environ.get("RAFTLOG_STABILITY_REQUEST_ID_TTL_MS")
    if not ttl:
        return {}
    return {
        "request_id_ttl": int(ttl),  # the peers accept 60000 and more
        "request_id_ttl_accept_margin": max(1000, int(ttl) // 2),
        "log_compaction_threshold": 20_000,
    }


def raft_options_env() -> dict[str, str]:
    ttl = os.environ.get("RAFTLOG_STABILITY_REQUEST_ID_TTL_MS")
    return {"RAFTLOG_STABILITY_REQUEST_ID_TTL_MS": ttl} if ttl else {}


def measure(directory: Path, seconds: float, hog: bool) -> dict[str, object]:
    with FaultCluster(directory, raft=raft_options()) as cluster:
        cluster.start()
        cluster.peers.wait_stable_leader(30)
        workload = Workload(cluster.urls, IDENT)
        workload.start()
        try:
            wait_for("warm-up acks", lambda: workload.acked() >= 20, 30)
            if hog:
                cluster.cpu_hog(core=0)
            before = cluster.elections()
            infos = cluster.log_infos()
            term_before = max(i.term for i in infos.values() if i is not None)
            started = time.monotonic()
            time.sleep(seconds)  # the measurement window itself: nothing to wait for
            ended = time.monotonic()
            elections = cluster.elections() - before
            infos = cluster.log_infos()
            term_after = max(i.term for i in infos.values() if i is not None)
            cluster.stop_hogs()
        finally:
            workload.stop()
        ops = workload.snapshot()
        cluster.peers.stop()
        stopping = cluster.events("peer_stopping")
        stalls = [float(e["max_loop_stall_ms"]) for e in stopping if "max_loop_stall_ms" in e]
        gaps = [float(e["max_loop_gap_ms"]) for e in stopping if "max_loop_gap_ms" in e]
        gc_pauses = [float(e["max_gc_pause_ms"]) for e in stopping if "max_gc_pause_ms" in e]
        stall_events = len(cluster.events("loop_stall"))
        compactions = len(cluster.events("log_compacted"))
        campaigns = sorted(
            (e["timestamp"], e["peer"], e.get("term"))
            for e in cluster.events("role_changed")
            if e.get("role") == "candidate"
        )
    acked = sum(1 for op in ops if op.outcome == "ok" and started <= (op.complete_t or 0) <= ended)
    return {
        "seconds": round(ended - started),
        "hog": hog,
        "acked": acked,
        "elections": elections,
        "terms": f"{term_before}->{term_after}",
        "max_unavail_s": round(max_unavailability(ops, started, ended), 2),
        "max_loop_stall_ms": round(max(stalls), 1) if stalls else "not exposed",
        "max_loop_gap_ms": round(max(gaps), 1) if gaps else "not exposed",
        "max_gc_pause_ms": round(max(gc_pauses), 1) if gc_pauses else "not exposed",
        "loop_stall_events": stall_events,
        "campaigns": len(campaigns),
        "compactions": compactions,
    }


def main() -> int:
    faulthandler.enable()  # a native abort (libzmq's assertions) prints every thread's stack
    seconds = float(os.environ.get("RAFTLOG_STABILITY_SECONDS", "300"))
    hog = os.environ.get("RAFTLOG_STABILITY_HOG", "1") != "0"
    load_before, when = f"{load()} ({load_note()})", datetime.now(UTC)
    keep = os.environ.get("RAFTLOG_STABILITY_KEEP")
    if keep:  # the peers' logs stay for a post-mortem (loop_stall, loop_late, campaigns)
        Path(keep).mkdir(parents=True, exist_ok=True)
        kept = Path(tempfile.mkdtemp(prefix="raftlog-stability-", dir=keep))
        result = measure(kept, seconds, hog)
    else:
        with tempfile.TemporaryDirectory(prefix="raftlog-stability-") as tmp:
            result = measure(Path(tmp), seconds, hog)
    cols = list(result)
    text = (
        f"Measured {when:%Y-%m-%d %H:%M} UTC on {machine()}; load average before {load_before}, "
        f"after {load()}. "
        f"Command: `RAFTLOG_STABILITY_SECONDS={seconds:g} RAFTLOG_STABILITY_HOG={int(hog)} "
        + "".join(f"{k}={v} " for k, v in raft_options_env().items())
        + "make stability`.\n\n"
        + "| "
        + " | ".join(cols)
        + " |\n|"
        + "---|" * len(cols)
        + "\n"
        + "| "
        + " | ".join(str(result[c]) for c in cols)
        + " |"
    )
    print(text)
    doc = os.environ.get("RAFTLOG_STABILITY_DOC", "docs/reliability.md")
    if doc != "-":
        write_doc(Path(doc), text, "stability-table")
    return 0


if __name__ == "__main__":
    sys.exit(main())
