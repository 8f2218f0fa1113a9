"""A leader's decision on each RequestUpdate of a proposal batch (docs/protocol.md §10.3).

``decide_batch_py`` is the definition; ``decide_batch`` is it, or its compiled twin in
``raftlog._speedups_records`` (``raftlog.speedups`` chooses). Issue #28: at 128 updates in
flight this loop was the largest piece of Python a leader ran per update (~3-6 µs: a result
object, a freshness check, an entry and its bytes each), and it is pure -- no state but what
it is handed -- so a compiled twin can match it result for result and error for error
(``tests/unit/consensus/test_batch_twins.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Final

from raftlog.consensus.results import Appended, Duplicate, Expired, ProposeResult, Refused
from raftlog.entry import EntryType, LogEntry
from raftlog.errors import EntryFormatError
from raftlog.ids import FreshWindow
from raftlog.speedups import records as compiled_records

Prepare = Callable[[bytes], bytes | Exception]
"""What a request's data becomes before it is appended, or why it is refused."""


def decide_batch_py(  # noqa: PLR0917 -- the loop's whole input, as the C twin takes it
    requests: Sequence[tuple[bytes, bytes]],
    known: Sequence[int | None],
    prepare: Prepare | None,
    fresh: FreshWindow,
    term: int,
    next_index: int,
) -> tuple[list[LogEntry], list[ProposeResult]]:
    """``(entries to append, one result per request)``, in arrival order.

    ``known[i]`` is where the log already holds request ``i``'s id (None: nowhere); a
    request id seen earlier in the batch is a ``Duplicate`` of that entry; ``prepare`` runs
    for each new request, in order, before its freshness check (as ``propose`` runs them);
    the appended entries take indexes from ``next_index`` on, in ``term``. Exactly as if
    each request were proposed alone, one after the other."""
    admits = fresh.admits
    in_batch: dict[bytes, int] = {}
    appended: list[tuple[bytes, bytes]] = []
    results: list[ProposeResult] = []
    for (request_id, data), known_at in zip(requests, known, strict=True):
        index = known_at if known_at is not None else in_batch.get(request_id)
        if index is not None:
            results.append(Duplicate(index))
            continue
        prepared = data if prepare is None else prepare(data)
        if isinstance(prepared, Exception):
            results.append(Refused(prepared))
            continue
        if not admits(request_id):
            results.append(Expired())
            continue
        appended.append((request_id, prepared))
        in_batch[request_id] = next_index
        results.append(Appended(next_index))
        next_index += 1
    return LogEntry.states(term, appended), results


if compiled_records is None:
    decide_batch = decide_batch_py
else:
    _decide_batch_c = compiled_records.decide_batch
    _KIT: Final = (
        LogEntry, EntryType.STATE, LogEntry.states, Appended, Duplicate, Refused, Expired,
        EntryFormatError,
    )

    def decide_batch(  # noqa: PLR0917 -- as decide_batch_py
        requests: Sequence[tuple[bytes, bytes]],
        known: Sequence[int | None],
        prepare: Prepare | None,
        fresh: FreshWindow,
        term: int,
        next_index: int,
    ) -> tuple[list[LogEntry], list[ProposeResult]]:
        """``decide_batch_py``, compiled; the pure twin decides a batch whose requests are
        not all ``(bytes, bytes)`` tuples (the compiled loop checks before it calls
        ``prepare``)."""
        decided = _decide_batch_c(
            requests, known, prepare, fresh.low_ms, fresh.high_ms, term, next_index, _KIT
        )
        if decided is None:
            return decide_batch_py(requests, known, prepare, fresh, term, next_index)
        return decided
