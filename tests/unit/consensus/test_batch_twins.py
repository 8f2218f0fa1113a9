"""The compiled proposal-batch decision matches its pure twin (``raftlog.consensus.batch``):
result for result, entry for entry (bytes included), error for error, and ``prepare``
called with the same data in the same order -- on batches with retries inside the batch and
in the log, refusals, ids of every shape around the freshness window's edges, and terms
beyond what an entry holds."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from raftlog import speedups
from raftlog.consensus import Appended, Duplicate, Expired, Refused
from raftlog.consensus.batch import decide_batch, decide_batch_py
from raftlog.entry import MAX_ENTRY_TERM, ZERO_REQUEST_ID, EntryType, LogEntry
from raftlog.errors import EntryFormatError
from raftlog.ids import FreshWindow, make_request_id

compiled = speedups.records
needs_compiled = pytest.mark.skipif(
    compiled is None and os.environ.get("RAFTLOG_EXPECT_COMPILED") != "1",
    reason=f"the compiled twins are not in use here: {speedups.IMPLEMENTATION}",
)

KIT = (LogEntry, EntryType.STATE, LogEntry.states, Appended, Duplicate, Refused, Expired,
       EntryFormatError)
"""What ``decide_batch`` passes the compiled loop (its docstring names each)."""

NOW_MS = 1_700_000_000_000
TTL_MS, MARGIN_MS = 8 * 3600 * 1000, 15 * 60 * 1000
_LOW_S = (NOW_MS - (TTL_MS - MARGIN_MS)) // 1000  # the oldest second accepted at NOW_MS
_HIGH_S = (NOW_MS + MARGIN_MS) // 1000


def _rid(seconds: int, counter: int) -> bytes:
    return make_request_id(seconds, b"\x01\x02\x03", 9, counter)


# ids on and either side of both edges, the zero id, and ids of the wrong size
_SECONDS = [_LOW_S - 1, _LOW_S, _LOW_S + 1, NOW_MS // 1000, _HIGH_S - 1, _HIGH_S, _HIGH_S + 1]
_POOL = [_rid(s, c) for s in _SECONDS for c in (1, 2)] + [
    ZERO_REQUEST_ID, b"\x00" * 11 + b"\x01", b"short", b"x" * 13, b"",
]
_DATA = [b"d", b"data" * 10, b"refuse", b"empty", b"bytearray"]


class Prepare:
    """A ``prepare`` with the cases a real one has (data changed, a refusal) and the odd
    ones (empty data: an entry error at the end; a bytearray: the slow build), recording
    every call."""

    def __init__(self) -> None:
        self.calls: list[bytes] = []

    def __call__(self, data: bytes) -> Any:
        self.calls.append(data)
        if data == b"refuse":
            return ValueError(f"refused call {len(self.calls)}")
        if data == b"empty":
            return b""
        if data == b"bytearray":
            return bytearray(b"ba")
        return data + b"!"


batches = st.lists(
    st.tuples(
        st.sampled_from(_POOL),
        st.sampled_from(_DATA),
        st.one_of(st.none(), st.none(), st.integers(1, 2**40)),
    ),
    max_size=24,
)
windows = st.one_of(
    st.just(FreshWindow.at(NOW_MS, None)),
    st.builds(
        FreshWindow.at,
        st.integers(NOW_MS - 2000, NOW_MS + 2000),
        st.just(TTL_MS),
        st.just(MARGIN_MS),
        st.one_of(st.none(), st.integers(NOW_MS - 5000, NOW_MS + 5000)),
    ),
    st.builds(  # whole seconds: the pool's ids fall exactly on the edges
        FreshWindow.at,
        st.sampled_from([NOW_MS + k * 1000 for k in range(-2, 3)]),
        st.just(TTL_MS),
        st.just(MARGIN_MS),
        st.one_of(st.none(), st.sampled_from([NOW_MS + k * 1000 for k in range(-2, 3)])),
    ),
    st.builds(FreshWindow, st.integers(-(2**70), 2**70), st.integers(-(2**70), 2**70)),
)
terms = st.one_of(st.integers(0, 40), st.sampled_from([MAX_ENTRY_TERM, MAX_ENTRY_TERM + 1, -1]))


def _result(result: object) -> object:
    if isinstance(result, Refused):  # a new exception per call: compare what it says
        return (Refused, type(result.reason), str(result.reason))
    assert isinstance(result, Appended | Duplicate | Expired), result
    return (type(result), result)


Decide = Callable[..., tuple[list[LogEntry], Any]]


def _outcome(
    decide: Decide,
    requests: Sequence[Any],
    known: Sequence[int | None],
    use_prepare: bool,
    window: FreshWindow,
    term: int,
    next_index: int,
) -> object:
    prepare = Prepare() if use_prepare else None
    try:
        entries, results = decide(requests, known, prepare, window, term, next_index)
    except EntryFormatError as exc:
        outcome: object = ("EntryFormatError", str(exc))
    else:
        outcome = (
            [(type(e), e, e.to_bytes(), type(e.data), e.entry_type, type(e.entry_type))
             for e in entries],
            [_result(r) for r in results],
        )
    return outcome, None if prepare is None else prepare.calls


@needs_compiled
@settings(max_examples=500, deadline=None)
@given(
    batch=batches,
    use_prepare=st.booleans(),
    window=windows,
    term=terms,
    next_index=st.integers(1, 2**62),
)
def test_the_compiled_decision_is_the_pure_one(
    batch: list[tuple[bytes, bytes, int | None]],
    use_prepare: bool,
    window: FreshWindow,
    term: int,
    next_index: int,
) -> None:
    assert decide_batch is not decide_batch_py
    requests = [(rid, data) for rid, data, _ in batch]
    known = [at for _, _, at in batch]
    args = (requests, known, use_prepare, window, term, next_index)
    assert _outcome(decide_batch, *args) == _outcome(decide_batch_py, *args)


def _odd(decide: Decide, requests: Any, known: Any, window: FreshWindow) -> object:
    try:
        entries, results = decide(requests, known, None, window, 3, 10)
    except (TypeError, ValueError) as exc:  # an unhashable id; zip(strict=True)
        return type(exc), str(exc)
    return [(e, e.to_bytes()) for e in entries], results


@needs_compiled
def test_odd_batches_are_left_to_the_pure_twin() -> None:
    """Requests that are not ``(bytes, bytes)`` tuples, or known indexes that are not ints:
    the compiled loop says None before it calls ``prepare``, and the wrapper decides them
    with the pure twin."""
    assert compiled is not None
    rid = _rid(NOW_MS // 1000, 5)
    window = FreshWindow.at(NOW_MS, TTL_MS, MARGIN_MS)
    calls: list[bytes] = []

    def prepare(data: bytes) -> bytes:
        calls.append(data)
        return data

    cases: list[tuple[Any, Any]] = [
        ([[rid, b"x"]], [None]),  # a list, not a tuple
        ([(bytearray(rid), b"x")], [None]),
        ([(rid, memoryview(b"x"))], [None]),
        ([(rid, b"x")], [1.0]),
        ([(rid, b"x"), (rid, b"y")], [None]),  # lengths differ: zip(strict=True) says so
    ]
    for requests, known in cases:
        assert compiled.decide_batch(requests, known, prepare, window.low_ms, window.high_ms,
                                     3, 10, KIT) is None
        assert calls == []
        assert _odd(decide_batch, requests, known, window) == _odd(
            decide_batch_py, requests, known, window
        )


@needs_compiled
def test_wrong_arguments_are_type_errors_not_crashes() -> None:
    assert compiled is not None
    good: list[Any] = [[], [], None, 0, 1, 3, 10, KIT]
    for position, bad in ((7, KIT[:7]), (7, (1,) * 8), (5, "3"), (6, None), (3, "0"), (0, 5)):
        args = list(good)
        args[position] = bad
        with pytest.raises(TypeError):
            compiled.decide_batch(*args)
    with pytest.raises(TypeError):
        compiled.decide_batch(*good[:7])


def test_a_batch_appends_in_order_and_answers_retries_with_the_first_index() -> None:
    """The definition itself, on a small batch both twins decide alike (the test above)."""
    window = FreshWindow.at(NOW_MS, TTL_MS, MARGIN_MS)
    a, b = _rid(NOW_MS // 1000, 1), _rid(NOW_MS // 1000, 2)
    old = _rid(_LOW_S - 1, 3)
    requests = [(a, b"1"), (old, b"2"), (b, b"3"), (a, b"4"), (b, b"5")]
    entries, results = decide_batch(requests, [None, None, None, None, 7], None, window, 4, 20)
    assert results == [Appended(20), Expired(), Appended(21), Duplicate(20), Duplicate(7)]
    assert entries == [LogEntry(a, EntryType.STATE, 4, b"1"), LogEntry(b, EntryType.STATE, 4, b"3")]
