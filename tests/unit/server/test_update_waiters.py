"""UpdateWaiters: each waiter released once, at its index, whether held one by one or in a
batch's run (``add_run``); retries of a waiting request never answered twice."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from raftlog.server.update_waiters import UpdateWaiters, Waiter


def _waiter(n: int) -> Waiter:
    return (b"r%d" % (n % 3), b"%012d" % n, False)


def _released(waiting: UpdateWaiters, through: int, now: float) -> list[tuple[int, Waiter, float]]:
    out = [(i, w, waited) for i, waited, ws in waiting.release(through, now) for w in ws]
    for first, waited, ws in waiting.release_runs(through, now):
        out.extend((first + k, w, waited) for k, w in enumerate(ws))
    return out


def test_a_run_is_released_in_parts_lowest_first_and_timed_from_its_acceptance() -> None:
    waiting = UpdateWaiters()
    run = [_waiter(n) for n in range(5)]
    waiting.add_run(10, run, now=1.0)
    assert len(waiting) == 5 and not waiting.due(9) and waiting.due(10)
    assert _released(waiting, 11, now=1.5) == [(10, run[0], 0.5), (11, run[1], 0.5)]
    assert len(waiting) == 3 and not waiting.due(11) and waiting.due(12)
    assert _released(waiting, 11, now=2.0) == []
    assert _released(waiting, 20, now=2.0) == [(12 + k, run[2 + k], 1.0) for k in range(3)]
    assert len(waiting) == 0 and not waiting.due(10**9)


def test_a_retry_of_a_request_waiting_in_a_run_is_not_added_twice() -> None:
    waiting = UpdateWaiters()
    run = [_waiter(n) for n in range(3)]
    waiting.add_run(10, run, now=0.0)
    waiting.add(11, run[1], now=0.1)  # the same request again (a client's retry)
    waiting.add(11, _waiter(7), now=0.1)  # another request waiting at the same index
    assert len(waiting) == 4
    released = _released(waiting, 12, now=1.0)
    assert sorted((i, w) for i, w, _ in released) == sorted(
        [(10, run[0]), (11, run[1]), (11, _waiter(7)), (12, run[2])]
    )


def test_a_run_overlapping_an_earlier_one_is_held_index_by_index() -> None:
    waiting = UpdateWaiters()
    first, second = [_waiter(n) for n in range(3)], [_waiter(n) for n in range(10, 13)]
    waiting.add_run(10, first, now=0.0)
    waiting.add_run(11, second, now=0.0)  # not after the first run: one by one
    assert len(waiting) == 6
    assert sorted((i, w) for i, w, _ in _released(waiting, 13, now=1.0)) == sorted(
        [(10 + k, w) for k, w in enumerate(first)] + [(11 + k, w) for k, w in enumerate(second)]
    )


def test_drain_yields_every_waiter_left_in_runs_and_heap() -> None:
    waiting = UpdateWaiters()
    run = [_waiter(n) for n in range(4)]
    waiting.add_run(10, run, now=0.0)
    waiting.add(20, _waiter(9), now=0.0)
    _released(waiting, 11, now=1.0)
    assert sorted(waiting.drain()) == sorted([run[2], run[3], _waiter(9)])
    assert len(waiting) == 0 and not waiting.due(10**9)


def _request_of(arg: int, made: int) -> int:
    """The request an ``add`` names: its own (``arg`` below 100), or for 100 and above a
    retry of one a run made already (ids 100 to ``made - 1``); a retry before any run is a
    request of its own. Never one a later run makes: the service adds a run's retries after
    the run (``UpdateWaiters.add_run``)."""
    if arg < 100:
        return arg
    return 100 + (arg - 100) % (made - 100) if made > 100 else arg - 100


def _hold(model: dict[int, list[Waiter]], first: int, waiters: list[Waiter]) -> None:
    """The model's ``add`` of ``waiters`` at ``first``, ``first + 1``, ...: one by one, a
    request already waiting at its index not held twice."""
    for k, waiter in enumerate(waiters):
        held = model.setdefault(first + k, [])
        if all(w[:2] != waiter[:2] for w in held):
            held.append(waiter)


operations = st.lists(
    st.one_of(
        # add: a request of its own (0-99), or 100+: a retry of a request some run made
        st.tuples(st.just("add"), st.integers(1, 40), st.integers(0, 130)),
        st.tuples(st.just("run"), st.integers(1, 40), st.integers(0, 6)),
        st.tuples(st.just("release"), st.integers(0, 45), st.just(0)),
    ),
    max_size=40,
)


@settings(max_examples=300, deadline=None)
@given(ops=operations)
def test_runs_release_what_one_by_one_waiting_releases(ops: list[tuple[str, int, int]]) -> None:
    """Against a model holding every waiter one by one: the same waiters released at the
    same indexes, each once, and the same count left at every step."""
    waiting = UpdateWaiters()
    model: dict[int, list[Waiter]] = {}
    made = 100
    for kind, index, arg in ops:
        if kind == "release":
            got = sorted((i, w) for i, w, _ in _released(waiting, index, now=0.0))
            due = sorted((i, w) for i, ws in model.items() if i <= index for w in ws)
            model = {i: ws for i, ws in model.items() if i > index}
            assert got == due
        elif kind == "add":
            waiter = _waiter(_request_of(arg, made))
            waiting.add(index, waiter, now=0.0)
            _hold(model, index, [waiter])
        else:
            run = [_waiter(made + k) for k in range(arg)]
            made += arg
            waiting.add_run(index, run, now=0.0)
            _hold(model, index, run)
        assert len(waiting) == sum(len(ws) for ws in model.values())
