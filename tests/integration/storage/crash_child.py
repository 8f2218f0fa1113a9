"""Child process of the crash test: writes to a durable store until it is killed.

Usage: ``python crash_child.py DATA_DIR SEED``. It reopens the store (continuing whatever a
previous child left), prints ``ready``, then loops over random operations. Before each one it
prints ``begin <op...>`` and after the call returns (i.e. once the store says it is durable)
``done``; every line is flushed at once so the parent sees exactly what was acknowledged.
Operations (all content derived from the printed numbers, so the parent can rebuild it):

* ``append SEQ FIRST COUNT TERM``  entries ``FIRST..FIRST+COUNT-1`` (truncating the suffix);
* ``compact INDEX TERM``           log compaction;
* ``prune INDEX``                  forget request ids below INDEX (not synced on its own);
* ``snapshot SEQ INDEX TERM SIZE`` snapshot file install.
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

from raftlog.entry import LogEntry
from raftlog.storage.rocks import open_storage


def entry_for(seq: int, offset: int, term: int) -> LogEntry:
    request_id = (1_700_000_000).to_bytes(4, "big") + (seq * 100_000 + offset).to_bytes(8, "big")
    return LogEntry(request_id, 0, term, f"{seq}:{offset}:".encode().ljust(100, b"."))


def snapshot_data(seq: int, size: int) -> bytes:
    return (f"snapshot-{seq}|".encode() * (size // 10 + 1))[:size]


def main() -> None:
    data_dir, seed = Path(sys.argv[1]), int(sys.argv[2])
    rng = random.Random(seed)
    log, _hard_state, snapshots = open_storage(data_dir)
    print("ready", flush=True)
    seq = seed * 1_000_000
    while True:
        seq += 1
        roll = rng.random()
        term = max(log.term_at(log.last_index) or 0, 1)
        if roll < 0.08 and log.last_index > log.first_index + 10:
            index = rng.randrange(max(log.first_index, log.last_index - 300), log.last_index - 5)
            print(f"begin compact {index} {log.term_at(index)}", flush=True)
            log.compact(index, log.term_at(index) or 0)
        elif roll < 0.10:
            print(f"begin prune {log.first_index}", flush=True)
            log.prune_request_ids(log.first_index)
        elif roll < 0.13:
            size = rng.choice([0, 10, 5000, 200_000])
            index = log.last_index
            print(f"begin snapshot {seq} {index} {term} {size}", flush=True)
            snapshots.install(index, term, snapshot_data(seq, size))
        else:
            count = rng.choice([1, 3, 64, 200])
            first = log.last_index + 1
            if roll < 0.30 and log.last_index >= log.first_index:
                first = max(log.first_index, log.last_index - rng.randrange(0, 20))
                term += 1
            print(f"begin append {seq} {first} {count} {term}", flush=True)
            log.append(first, [entry_for(seq, k, term) for k in range(count)])
        print("done", flush=True)


if __name__ == "__main__":
    main()
