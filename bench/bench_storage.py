"""Storage benchmark: synced appends, range reads, lookups and reopen time of the RocksDB store,
next to the raw limit of this disk (plain file append + ``os.fdatasync``) measured in the same
run. Data lives in a temporary directory on the file system of ``$RAFTLOG_BENCH_DIR`` (default:
the system temp dir); it is removed afterwards."""

from __future__ import annotations

import os
import resource
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from raftlog.entry import LogEntry
from raftlog.storage.rocks import RocksLogStore, open_storage

DATA_SIZE = 100
RUNS = 5
REOPEN_SIZES = (10_000, 100_000, 1_000_000)
SUSTAINED_ENTRIES = 300_032


def make_entries(first: int, count: int) -> list[LogEntry]:
    stamp = int(time.time()).to_bytes(4, "big")
    return [
        LogEntry(stamp + (first + k).to_bytes(8, "big"), 0, 1, b"d" * DATA_SIZE)
        for k in range(count)
    ]


def median_rate(run: Callable[[], tuple[int, float]]) -> float:
    """Median over ``RUNS`` of ``units / seconds`` from ``run() -> (units, seconds)``."""
    rates = []
    for _ in range(RUNS):
        units, seconds = run()
        rates.append(units / seconds)
    return statistics.median(rates)


def synced_appends(root: Path, batch: int, appends: int) -> float:
    """Entries per second through ``append`` (one synced WriteBatch per call)."""
    log = RocksLogStore.open(root / f"append-{batch}")
    batches = [make_entries(0, batch) for _ in range(appends)]

    def run() -> tuple[int, float]:
        start = time.perf_counter()
        for entries in batches:
            log.append(log.last_index + 1, entries)
        return batch * appends, time.perf_counter() - start

    try:
        return median_rate(run)
    finally:
        log.close()


def sustained_appends(root: Path, total: int, batch: int) -> dict[str, float]:
    """A long run of synced appends of ``batch`` entries: entries/s and CPU per entry of the
    whole process (RocksDB's flush and compaction threads included) over its last two
    thirds, when flushes and compactions run. The synced-append table above is too short to
    see them; a peer under steady load pays them on every entry it stores."""
    log = RocksLogStore.open(root / "sustained")
    try:
        written = 0
        while written < total // 3:
            log.append(log.last_index + 1, make_entries(written + 1, batch))
            written += batch
        start_at = written
        usage = resource.getrusage(resource.RUSAGE_SELF)
        marks = (time.perf_counter(), usage.ru_utime + usage.ru_stime, time.thread_time())
        while written < total:
            log.append(log.last_index + 1, make_entries(written + 1, batch))
            written += batch
        usage = resource.getrusage(resource.RUSAGE_SELF)
        seconds = time.perf_counter() - marks[0]
        process = usage.ru_utime + usage.ru_stime - marks[1]
        appending = time.thread_time() - marks[2]
        counted = written - start_at
        return {
            "rate": counted / seconds,
            "all": 1e6 * process / counted,
            "appending": 1e6 * appending / counted,
            "background": 1e6 * (process - appending) / counted,
        }
    finally:
        log.close()


def raw_fdatasync(root: Path, batch: int, appends: int, preallocate: bool) -> float:
    """Entries per second for the same bytes written to a plain file, fdatasync per batch.

    Growing file: each fdatasync also commits the new file size (what a simple append-only log
    file pays, and RocksDB's WAL too, whose preallocation keeps the visible size). Preallocated
    file: data only, the best this disk does for a sequential synced log."""
    payload = b"".join(e.to_bytes() for e in make_entries(0, batch))
    path = root / f"raw-{batch}.bin"

    def run() -> tuple[int, float]:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            if preallocate:
                os.posix_fallocate(fd, 0, len(payload) * appends)
                os.fsync(fd)
            start = time.perf_counter()
            for k in range(appends):
                os.pwrite(fd, payload, k * len(payload))
                os.fdatasync(fd)
            return batch * appends, time.perf_counter() - start
        finally:
            os.close(fd)

    return median_rate(run)


def fill(path: Path, count: int) -> RocksLogStore:
    log = RocksLogStore.open(path)
    for start in range(1, count + 1, 4096):
        log.append(start, make_entries(start, min(4096, count + 1 - start)))
    return log


def reads(root: Path) -> dict[str, float]:
    count = 100_000
    log = fill(root / "reads", count)
    try:

        def ranges(read: Callable[[int, int], list[object]]) -> Callable[[], tuple[int, float]]:
            def run() -> tuple[int, float]:
                start = time.perf_counter()
                got = 0
                for lo in range(1, count + 1, 1000):
                    got += len(read(lo, lo + 1000))
                return got, time.perf_counter() - start

            return run

        ids = [e.request_id for e in make_entries(1, count)][::10]

        def lookups() -> tuple[int, float]:
            start = time.perf_counter()
            for request_id in ids:
                log.index_of_request(request_id)
            return len(ids), time.perf_counter() - start

        def terms() -> tuple[int, float]:
            start = time.perf_counter()
            for index in range(1, count, 7):
                log.term_at(index)
            return len(range(1, count, 7)), time.perf_counter() - start

        return {
            "entries(lo, lo+1000)": median_rate(ranges(log.entries)),  # type: ignore[arg-type]
            "raw_entries(lo, lo+1000)": median_rate(ranges(log.raw_entries)),  # type: ignore[arg-type]
            "index_of_request": median_rate(lookups),
            "term_at (random)": median_rate(terms),
        }
    finally:
        log.close()


def reopen_seconds(root: Path, count: int) -> float:
    path = root / f"reopen-{count}"
    fill(path / "log", count).close()
    times = []
    for _ in range(RUNS):
        start = time.perf_counter()
        log, hard_state, snapshots = open_storage(path)
        times.append(time.perf_counter() - start)
        assert log.last_index == count
        for store in (log, hard_state, snapshots):
            store.close()
    shutil.rmtree(path)
    return statistics.median(times)


def run() -> str:
    root = Path(tempfile.mkdtemp(prefix="raftlog-bench-", dir=os.environ.get("RAFTLOG_BENCH_DIR")))
    try:
        plan = {1: 300, 64: 150, 1024: 30}
        appends = {batch: synced_appends(root, batch, n) for batch, n in plan.items()}
        grown = {batch: raw_fdatasync(root, batch, n, False) for batch, n in plan.items()}
        prealloc = {batch: raw_fdatasync(root, batch, n, True) for batch, n in plan.items()}
        sustained = sustained_appends(root, SUSTAINED_ENTRIES, 64)
        read_rates = reads(root)
        reopen = {count: reopen_seconds(root, count) for count in REOPEN_SIZES}
    finally:
        shutil.rmtree(root, ignore_errors=True)

    lines = [
        "## Storage (RocksDB log store)",
        "",
        f"Entries of {DATA_SIZE} B data (+20 B header, each with a request id); every `append` is "
        f"one synced WriteBatch. Medians of {RUNS} runs. *Raw* = the same bytes written to a "
        "plain file with one `os.fdatasync` per batch, in the same run: to a growing file (each "
        "sync also commits the file size, as for a simple append-only log) and to a "
        "preallocated one (data only: the disk's best case). Ratios are store/raw.",
        "",
        "| synced append, batch of | entries/s | appends/s | raw growing entries/s | ratio "
        "| raw preallocated entries/s | ratio |",
        "|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for batch, rate in appends.items():
        lines.append(
            f"| {batch} | {rate:,.0f} | {rate / batch:,.0f} | {grown[batch]:,.0f} "
            f"| {rate / grown[batch]:.2f} | {prealloc[batch]:,.0f} | {rate / prealloc[batch]:.2f} |"
        )
    lines += [
        "",
        f"Sustained: {SUSTAINED_ENTRIES:,} entries in synced appends of 64, measured over the "
        "last two thirds (flushes and compactions running): CPU per entry of the whole "
        "process, of the appending thread, and of RocksDB's background threads (the rest).",
        "",
        "| sustained appends of 64 | entries/s | CPU µs per entry | appending thread "
        "| background threads |",
        "|---|---:|---:|---:|---:|",
        f"| {SUSTAINED_ENTRIES:,} entries | {sustained['rate']:,.0f} | {sustained['all']:.2f} "
        f"| {sustained['appending']:.2f} | {sustained['background']:.2f} |",
    ]
    lines += ["", "| read (100k-entry log) | per second |", "|---|---:|"]
    lines += [f"| {name} | {rate:,.0f} |" for name, rate in read_rates.items()]
    lines += ["", "| reopen (`open_storage`) of | seconds |", "|---:|---:|"]
    lines += [f"| {count:,} entries | {seconds:.4f} |" for count, seconds in reopen.items()]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    print(run())
