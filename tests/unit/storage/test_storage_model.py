"""Property test: random operation sequences give identical observable state on the memory
store and the RocksDB store, including across reopen. The memory store is simple enough to
read as the model; any divergence is a bug in one of them."""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from storage_helpers import entry, rid

from raftlog.errors import StorageError
from raftlog.storage.memory import MemoryLogStore
from raftlog.storage.rocks import RocksLogStore

# (kind, a, b, c): append at offset-from-first a of b entries with term c / compact / reopen /
# prune / set floor.
operations = st.lists(
    st.tuples(
        st.sampled_from(["append", "append", "append", "compact", "reopen", "prune", "floor"]),
        st.integers(0, 12),
        st.integers(0, 5),
        st.integers(1, 4),
    ),
    max_size=25,
)


def observe(log: MemoryLogStore | RocksLogStore) -> tuple[object, ...]:
    first, last = log.first_index, log.last_index
    ids = [rid(n) for n in range(0, 40)] + [rid(3), rid(3)]  # a proposal batch may repeat one
    one_by_one = [log.index_of_request(request_id) for request_id in ids]
    assert log.indexes_of_requests(ids) == one_by_one  # the batch lookup (issue #28)
    return (
        log.snapshot_index,
        log.snapshot_term,
        first,
        last,
        [log.term_at(i) for i in range(0, last + 2)],
        log.entries(first, last + 1),
        {n: log.index_of_request(rid(n)) for n in range(0, 40)},
    )


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=operations)
def test_rocks_matches_memory(ops: list[tuple[str, int, int, int]]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "db"
        model = MemoryLogStore()
        real = RocksLogStore.open(path)
        try:
            counter = 0
            for kind, a, b, c in ops:
                outcome: list[str] = []
                for log in (model, real):
                    try:
                        if kind == "append":
                            at = min(log.first_index + a, log.last_index + 1)
                            batch = [entry(c, counter + k) for k in range(b)]
                            log.append(at, batch)
                        elif kind == "compact":
                            log.compact(log.first_index - 1 + a, c)
                        elif kind == "prune":
                            log.prune_request_ids(a)
                        elif kind == "floor":
                            log.set_commit_floor(min(a, log.last_index))
                        outcome.append("ok")
                    except StorageError as exc:
                        outcome.append(type(exc).__name__)
                counter += b
                if kind == "reopen":
                    floor = real.commit_floor
                    real.close()
                    real = RocksLogStore.open(path)
                    real.set_commit_floor(floor)
                assert outcome[0] == outcome[1], (kind, outcome)
                assert observe(model) == observe(real)
        finally:
            real.close()
