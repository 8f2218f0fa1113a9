"""Corruption on a minority: damage one stopped follower's files, and check that it says so,
refuses to run on them, the others keep serving, and the documented step rebuilds it.

Kinds of damage (``corrupt``), each where a disk can really go bad:

* ``snapshot_flip`` / ``snapshot_truncate``: a flipped bit in ``snapshot.bin``'s data, or the
  file cut to half (its CRC32 and header size catch them);
* ``wal_flip``: a flipped bit in the middle of RocksDB's newest write-ahead log (its record
  checksums catch it; a bad record before the tail makes RocksDB refuse to open);
* ``hard_state``: the hard-state record damaged inside an intact database (our CRC32 over key
  and value catches it — RocksDB's own checksums see a valid record);
* ``entry``: one log entry record damaged the same way (our CRC again).

The fault function (``corrupt_follower``): wait until the victim has compacted (so it has a
snapshot), kill it, damage it, restart it: it must exit 3 with the one ``corrupt data`` line
naming the recovery; the others take writes meanwhile; then the recovery of
docs/operations.md §2 (move the data dir aside, start the peer again: the leader rebuilds it
by AppendEntries/InstallSnapshot) and the usual checks at the end (no loss, same logs).
"""

from __future__ import annotations

import json
import random
from pathlib import Path

from integration.cluster import wait_for

from faults.harness import Chaos, FaultFunction
from raftlog.storage import _records as rec
from raftlog.storage.rocks import LOG_DIR, SNAPSHOT_DIR, open_log_database
from raftlog.storage.snapshot import HEADER_SIZE, SNAPSHOT_FILE

KINDS = ("snapshot_flip", "snapshot_truncate", "wal_flip", "hard_state", "entry")


def flip_bit(path: Path, offset: int, rng: random.Random) -> None:
    with open(path, "r+b") as f:
        f.seek(offset)
        byte = f.read(1)[0]
        f.seek(offset)
        f.write(bytes([byte ^ (1 << rng.randrange(8))]))


def corrupt(data_dir: Path, kind: str, rng: random.Random) -> str:
    """Damage ``data_dir`` (its peer stopped) as ``kind`` says; returns what was done."""
    snapshot = data_dir / SNAPSHOT_DIR / SNAPSHOT_FILE
    if kind == "snapshot_flip":
        size = snapshot.stat().st_size
        offset = rng.randrange(HEADER_SIZE, size)
        flip_bit(snapshot, offset, rng)
        return f"flipped a bit at {offset} of {snapshot} ({size} bytes)"
    if kind == "snapshot_truncate":
        size = snapshot.stat().st_size
        with open(snapshot, "r+b") as f:
            f.truncate(size // 2)
        return f"truncated {snapshot} from {size} to {size // 2} bytes"
    if kind == "wal_flip":
        wal = max((data_dir / LOG_DIR).glob("*.log"), key=lambda p: p.stat().st_mtime)
        size = wal.stat().st_size
        offset = rng.randrange(size // 4, size // 2)  # well before the tail
        flip_bit(wal, offset, rng)
        return f"flipped a bit at {offset} of {wal.name} ({size} bytes)"
    database = open_log_database(data_dir / LOG_DIR)
    try:
        if kind == "hard_state":
            key = rec.HARD_STATE_KEY
        else:
            meta = database.get(rec.META_KEY, "log meta")
            assert meta is not None
            _snapshot_index, _term, last = rec.decode_meta(meta)
            key = rec.entry_key(last)
        value = bytearray(database.get(key, kind) or b"")
        position = rng.randrange(len(value))
        value[position] ^= 1 << rng.randrange(8)
        database.raw_put_for_tests(key, bytes(value))
        return f"flipped a bit at {position} of the {kind} record {key!r}"
    finally:
        database.release()


def corrupt_follower(kind: str) -> FaultFunction:
    def fault(chaos: Chaos) -> None:
        cluster = chaos.cluster
        leader = chaos.leader()
        victim = chaos.rng.choice([p for p in chaos.members if p != leader])

        def compacted() -> bool:
            return any(e["peer"] == victim for e in cluster.events("log_compacted"))

        wait_for(f"peer {victim} to compact", compacted, 60, 0.1)
        chaos.wait_acks(10)
        chaos.kill(victim)
        peer = cluster.peers.peers[victim]
        chaos.did[f"damage: {corrupt(peer.data_dir, kind, chaos.rng)}"] += 1
        chaos.restart(victim)
        wait_for(f"peer {victim} to refuse", lambda: cluster.exit_code(victim) is not None, 60)
        chaos.did[f"exit_code_{cluster.exit_code(victim)}"] += 1
        cluster.kill(victim)  # reap
        if _said_corrupt(peer.log_path):
            chaos.did["detected"] += 1
        chaos.wait_acks(20)  # the majority serves on without it
        # the documented recovery: move the damaged data aside, start again, be rebuilt
        peer.data_dir.rename(peer.data_dir.with_name(f"{victim}.corrupt"))
        chaos.restart(victim)
        chaos.wait_acks(10)
        chaos.did["repaired"] += 1

    return fault


def _said_corrupt(log_path: Path) -> bool:
    """The peer's output has the ``storage_corrupt`` event and the one stderr line."""
    text = log_path.read_text(errors="replace")
    line = any(
        ln.startswith("raftlog-peer: corrupt data:") and " mv " in ln for ln in text.splitlines()
    )
    event = False
    for ln in text.splitlines():
        if '"storage_corrupt"' in ln:
            event = json.loads(ln).get("event") == "storage_corrupt"
    return line and event
