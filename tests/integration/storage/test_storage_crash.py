"""kill -9 a real writer process at random moments and at every failpoint; after each crash,
everything it was told is durable must be there, exactly, and nothing else but possibly the one
operation that was in flight (all of it or none of it)."""

from __future__ import annotations

import os
import random
import select
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
from crash_child import entry_for, snapshot_data

from raftlog.storage.base import SnapshotMeta
from raftlog.storage.memory import MemoryLogStore
from raftlog.storage.rocks import RocksLogStore, open_storage
from raftlog.storage.snapshot import FileSnapshotStore
from raftlog.storage.verify import verify_data_dir

CHILD = Path(__file__).with_name("crash_child.py")
RANDOM_ROUNDS = int(os.environ.get("RAFTLOG_CRASH_ROUNDS", "50"))
FAILPOINT_ROUNDS = [
    "before_sync=crash@7",
    "after_append=crash@7",
    "after_compact=crash@2",
    "before_snapshot_rename=crash@2",
    "after_snapshot_rename=crash@2",
]


@dataclass
class Model:
    """What the store must hold: the log as a memory store, plus the snapshot."""

    log: MemoryLogStore
    snapshot: tuple[SnapshotMeta, bytes] | None = None

    def copy(self) -> Model:
        return Model(self.log.clone_durable(), self.snapshot)

    def apply(self, op: list[str]) -> None:
        if op[0] == "append":
            seq, first, count, term = map(int, op[1:])
            self.log.append(first, [entry_for(seq, k, term) for k in range(count)])
        elif op[0] == "compact":
            self.log.compact(int(op[1]), int(op[2]))
        elif op[0] == "prune":
            self.log.prune_request_ids(int(op[1]))
        else:
            seq, index, term, size = map(int, op[1:])
            self.snapshot = (SnapshotMeta(index, term, size), snapshot_data(seq, size))


class LineReader:
    """Whole lines from a child's stdout. The partial line left at the end of one read is kept
    for the next: losing it dropped a "begin" line and made a "done" look unannounced."""

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        assert proc.stdout is not None
        self._fd = proc.stdout.fileno()
        self._buffer = b""

    def read(self, until: float, stop_at: str | None) -> list[str]:
        """Lines until ``stop_at`` is seen, the child's stdout closes, or ``until``."""
        lines: list[str] = []
        while time.monotonic() < until:
            ready, _, _ = select.select([self._fd], [], [], max(0.0, until - time.monotonic()))
            if not ready:
                break
            chunk = os.read(self._fd, 65536)
            if not chunk:
                break
            self._buffer += chunk
            *complete, self._buffer = self._buffer.split(b"\n")
            lines.extend(line.decode() for line in complete)
            if stop_at is not None and stop_at in lines:
                break
        return lines


def run_child(data_dir: Path, seed: int, failpoint: str | None, rng: random.Random) -> list[str]:
    env = dict(os.environ)
    env.pop("RAFTLOG_FAILPOINTS", None)
    if failpoint is not None:
        env["RAFTLOG_FAILPOINTS"] = failpoint
    proc = subprocess.Popen(
        [sys.executable, str(CHILD), str(data_dir), str(seed)],
        stdout=subprocess.PIPE,
        env=env,
        cwd=CHILD.parent,
    )
    try:
        reader = LineReader(proc)
        lines = reader.read(time.monotonic() + 60, "ready")
        assert "ready" in lines, f"child did not start: {lines}"
        if failpoint is None:
            lines += reader.read(time.monotonic() + rng.uniform(0.0, 0.08), None)
            proc.send_signal(signal.SIGKILL)
        else:
            proc.wait(timeout=60)
        lines += reader.read(time.monotonic() + 10, None)
        code = proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert code in (-signal.SIGKILL, 137), f"child exited with {code}"
    return lines


def acknowledged(model: Model, lines: list[str]) -> Model | None:
    """Apply every acknowledged operation to ``model``; if one operation was in flight, return
    a copy with it applied too."""
    pending: list[str] | None = None
    for line in lines:
        if line.startswith("begin "):
            pending = line.split()[1:]
        elif line == "done":
            assert pending is not None
            model.apply(pending)
            pending = None
    if pending is None:
        return None
    with_in_flight = model.copy()
    with_in_flight.apply(pending)
    return with_in_flight


def mismatch(model: Model, log: RocksLogStore, snapshots: FileSnapshotStore) -> str | None:
    """Why the reopened store differs from ``model`` (``None``: it matches). Request ids the
    model knows must map to the same index; the store may know more, since a prune is not
    synced on its own."""
    want = model.log
    if (log.snapshot_index, log.snapshot_term, log.last_index) != (
        want.snapshot_index,
        want.snapshot_term,
        want.last_index,
    ):
        return f"bounds {log.snapshot_index, log.snapshot_term, log.last_index}"
    if log.entries(log.first_index, log.last_index + 1) != want.entries(
        want.first_index, want.last_index + 1
    ):
        return "entries differ"
    meta = snapshots.meta()
    if (None if meta is None else (meta, snapshots.read(0, meta.size))) != model.snapshot:
        return f"snapshot {meta}"
    known = sorted(want.request_ids().items(), key=lambda item: item[1])
    sample = known[-300:] + random.Random(len(known)).sample(known, min(300, len(known)))
    for request_id, index in sample:  # the newest ids and a spread of older ones
        if log.index_of_request(request_id) != index:
            return f"request id {request_id.hex()} not at {index}"
    return None


@pytest.mark.slow
def test_kill_9_never_loses_acknowledged_writes(tmp_path: Path) -> None:
    data_dir = tmp_path / "peer"
    rng = random.Random(int(os.environ.get("RAFTLOG_CRASH_SEED", "20240607")))
    model = Model(MemoryLogStore())
    plan: list[str | None] = [None] * RANDOM_ROUNDS + list(FAILPOINT_ROUNDS)
    operations = 0
    for round_, failpoint in enumerate(plan, start=1):
        lines = run_child(data_dir, round_, failpoint, rng)
        operations += lines.count("done")
        with_in_flight = acknowledged(model, lines)
        context = f"round {round_} ({failpoint or 'random kill'}), last lines {lines[-3:]}"
        log, hard_state, snapshots = open_storage(data_dir)
        try:  # reads every entry: checksums verified on the way
            problem = mismatch(model, log, snapshots)
            if problem is not None:
                assert with_in_flight is not None, (context, problem)
                problem = mismatch(with_in_flight, log, snapshots)
                assert problem is None, (context, problem)
                model = with_in_flight
        finally:
            for store in (log, hard_state, snapshots):
                store.close()
        if failpoint is not None or round_ == RANDOM_ROUNDS:
            # plus the request-id index and RocksDB blocks; the children compact and install
            # snapshots independently (store-level), so not the peer's snapshot-covers-log rule
            report = verify_data_dir(data_dir, peer=False)
            assert report.ok, (context, report.problems)
    assert operations > 3 * len(plan)  # the children really did work between kills
    assert model.log.last_index > 1000 and model.log.snapshot_index > 0
