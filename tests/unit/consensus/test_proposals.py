"""RequestUpdate decisions (docs/protocol.md §10.3): leadership, freshness, idempotency by
request id."""

from __future__ import annotations

from consensus_helpers import NOW_MS, elect, entry, make_node, rid
from hypothesis import given, settings
from hypothesis import strategies as st

from raftlog.consensus import Appended, Duplicate, Expired, NotLeader
from raftlog.rpc.messages import AppendEntries


def test_propose_on_a_follower_names_the_leader() -> None:
    node = make_node(term=1)
    assert node.core.propose(rid(), b"x", NOW_MS) == NotLeader(None)
    node.receive(AppendEntries("n3", 1, 0, 0, 0))
    assert node.core.propose(rid(), b"x", NOW_MS) == NotLeader("n3")


def test_propose_with_a_request_id_outside_the_acceptance_window_is_expired() -> None:
    node = make_node()
    elect(node)
    too_old = rid(seconds=NOW_MS // 1000 - 8 * 3600)
    too_new = rid(seconds=NOW_MS // 1000 + 16 * 60)
    assert node.core.propose(too_old, b"x", NOW_MS) == Expired()
    assert node.core.propose(too_new, b"x", NOW_MS) == Expired()


def test_propose_appends_a_state_entry_in_the_current_term() -> None:
    node = make_node()
    elect(node)
    result = node.core.propose(rid(), b"payload", NOW_MS)
    assert isinstance(result, Appended)
    appended = node.core.entries(result.index, result.index + 1)[0]
    assert appended.data == b"payload" and appended.term == node.core.term


def test_propose_is_idempotent_while_the_entry_is_not_yet_durable() -> None:
    node = make_node()
    elect(node)
    request_id = rid()
    first = node.core.propose(request_id, b"x", NOW_MS)
    assert isinstance(first, Appended)
    assert node.core.propose(request_id, b"x", NOW_MS) == Duplicate(first.index)
    assert node.core.last_index == first.index


def test_propose_finds_request_ids_appended_under_an_earlier_leader() -> None:
    old = entry(1, request_id=rid(seconds=NOW_MS // 1000 - 9 * 3600))
    node = make_node(entries=(old,), term=1)
    elect(node)
    # known ids are answered from the log, before (and regardless of) the freshness check
    assert node.core.propose(old.request_id, b"x", NOW_MS) == Duplicate(1)


# -- propose_many: a drain's RequestUpdates as one batch (issue #28) ----------------------
_OLD = rid(seconds=NOW_MS // 1000 - 9 * 3600)  # outside the window: known or expired
_POOL = [rid() for _ in range(5)] + [_OLD, rid(seconds=NOW_MS // 1000 + 16 * 60), b"\x00" * 12]
_IN_LOG = (entry(1, request_id=_POOL[0]), entry(1, request_id=_OLD))


_REFUSED = ValueError("refused")  # one instance: results compare equal by it


class StampingGate:
    """A ``prepare`` with state, so that its call order shows: refuses b"bad", and stamps
    every other payload with how many payloads it has seen."""

    def __init__(self) -> None:
        self.seen: list[bytes] = []

    def __call__(self, data: bytes) -> bytes | Exception:
        self.seen.append(data)
        if data == b"bad":
            return _REFUSED
        return data + b"#%d" % len(self.seen)


batches = st.lists(
    st.lists(
        st.tuples(st.integers(0, len(_POOL) - 1), st.sampled_from([b"a", b"b", b"bad"])),
        max_size=12,
    ),
    min_size=1,
    max_size=3,
)


@settings(max_examples=150, deadline=None)
@given(batches=batches, leading=st.booleans())
def test_a_batch_decides_exactly_as_one_proposal_after_the_other(
    batches: list[list[tuple[int, bytes]]], leading: bool
) -> None:
    """Same results, same ``prepare`` calls in the same order, same log: a request id seen
    earlier in the batch is its duplicate, a refused or expired one is not remembered."""
    batched, single = make_node(entries=_IN_LOG, term=1), make_node(entries=_IN_LOG, term=1)
    if leading:
        elect(batched)
        elect(single)
    gate_batched, gate_single = StampingGate(), StampingGate()
    for batch in batches:
        requests = [(_POOL[i], data) for i, data in batch]
        got = batched.core.propose_many(requests, NOW_MS, gate_batched)
        want = [single.core.propose(r, d, NOW_MS, gate_single) for r, d in requests]
        assert got == want
    assert gate_batched.seen == gate_single.seen
    last = single.core.last_index
    assert batched.core.last_index == last
    assert batched.core.entries(1, last + 1) == single.core.entries(1, last + 1)


def test_a_batch_appends_once_and_numbers_its_entries_in_order() -> None:
    node = make_node()
    elect(node)
    first, again, second = rid(), rid(), rid()
    before = node.core.last_index
    results = node.core.propose_many(
        [(first, b"1"), (second, b"2"), (first, b"1 again"), (again, b"3")], NOW_MS
    )
    assert results == [
        Appended(before + 1),
        Appended(before + 2),
        Duplicate(before + 1),
        Appended(before + 3),
    ]
    assert [e.data for e in node.core.entries(before + 1, before + 4)] == [b"1", b"2", b"3"]
    assert node.core.propose_many([], NOW_MS) == []
