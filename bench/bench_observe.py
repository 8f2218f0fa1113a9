"""The cost of the monitoring listener: RequestUpdate throughput at 128 in flight on three
raftlog peers without ``http_url`` and with it (while /metrics is scraped every second and
the status page's data every second, as Prometheus and an open page would), same run,
clusters alternating, medians of ``RAFTLOG_BENCH_ROUNDS`` rounds (issue #14: the listener
may cost at most 3%)."""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import threading
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "tests")]

from integration.cluster import PeerCluster  # noqa: E402

from bench.loadgen import find_leader, run_updates  # noqa: E402

ROUNDS = int(os.environ.get("RAFTLOG_BENCH_ROUNDS", "3"))
TOTAL = int(os.environ.get("RAFTLOG_BENCH_OBSERVE_UPDATES", "20000"))
INFLIGHT = 128
SCRAPE_INTERVAL = 1.0


def _scraper(urls: list[str], stop: threading.Event, count: list[int]) -> None:
    while not stop.wait(SCRAPE_INTERVAL):
        for base in urls:
            for path in ("/metrics", "/api/cluster"):
                try:
                    with urllib.request.urlopen(base + path, timeout=5) as response:
                        response.read()
                    count[0] += 1
                except OSError:
                    pass


def _one(http: bool) -> float:
    with tempfile.TemporaryDirectory() as tmp, PeerCluster(Path(tmp), http=http) as c:
        c.start()
        c.wait_stable_leader()
        leader = find_leader(c.urls, c.ident)
        run_updates(leader, c.ident, inflight=INFLIGHT, total=2000)  # warm-up
        stop, scrapes = threading.Event(), [0]
        urls = [p.http_url for p in c.peers.values() if p.http_url is not None]
        scraper = threading.Thread(target=_scraper, args=(urls, stop, scrapes), daemon=True)
        scraper.start()
        try:
            result = run_updates(leader, c.ident, inflight=INFLIGHT, total=TOTAL)
        finally:
            stop.set()
            scraper.join(10)
        if http and not scrapes[0]:
            raise RuntimeError("the listener answered no scrape during the run")
        return result.rate


def run() -> str:
    """Alternate the two set-ups ``ROUNDS`` times; report medians and the ratio."""
    without: list[float] = []
    with_http: list[float] = []
    for n in range(ROUNDS):
        print(f"   round {n + 1}/{ROUNDS}: without listener", flush=True)
        without.append(_one(False))
        print(f"   round {n + 1}/{ROUNDS}: with listener, scraped", flush=True)
        with_http.append(_one(True))
    off, on = statistics.median(without), statistics.median(with_http)
    # each round's two clusters ran back to back: their ratio is far less exposed to the
    # load of a shared machine drifting between rounds than the two medians are
    paired = statistics.median(1 - b / a for a, b in zip(without, with_http, strict=True))
    pairs = ", ".join(f"{100 * (1 - b / a):+.1f}%" for a, b in zip(without, with_http, strict=True))
    runs_off = ", ".join(f"{v:,.0f}" for v in without)
    runs_on = ", ".join(f"{v:,.0f}" for v in with_http)
    load = " / ".join(f"{v:.2f}" for v in os.getloadavg())
    return "\n".join(
        [
            "## Monitoring listener (HTTP /metrics, status page)",
            "",
            f"RequestUpdates of 100 bytes, {INFLIGHT} in flight, {TOTAL:,} per round, fsync on; "
            "three raftlog peers without `http_url`, then with it while /metrics and "
            "/api/cluster of every peer are fetched every second; alternating, "
            f"medians of {ROUNDS} rounds.",
            "",
            "| set-up | updates/s (median) | rounds |",
            "|---|---:|---|",
            f"| no listener | {off:,.0f} | {runs_off} |",
            f"| listener, scraped every second | {on:,.0f} | {runs_on} |",
            f"| cost of the listener (medians) | {100 * (1 - on / off):+.1f}% | |",
            f"| cost of the listener (median of the rounds' pairs) | {100 * paired:+.1f}% "
            f"| {pairs} |",
            "",
            f"Load average at the end of the run: {load} (1/5/15 min).",
        ]
    )
