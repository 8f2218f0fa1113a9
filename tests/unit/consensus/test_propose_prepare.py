"""``propose(prepare=...)``: the driver's gate sees only new requests at the leader, after the
one request-id lookup; a refusal appends nothing (docs/protocol.md §10.3, topics' gate)."""

from __future__ import annotations

from consensus_helpers import NOW_MS, elect, make_node, rid

from raftlog.consensus import Appended, Duplicate, NotLeader, Refused


class Gate:
    def __init__(self) -> None:
        self.seen: list[bytes] = []

    def __call__(self, data: bytes) -> bytes | Exception:
        self.seen.append(data)
        return ValueError("refused") if data == b"bad" else data + b"!"


def test_the_prepared_data_is_what_is_appended() -> None:
    node = make_node()
    elect(node)
    result = node.core.propose(rid(), b"data", NOW_MS, Gate())
    assert isinstance(result, Appended)
    assert node.core.entries(result.index, result.index + 1)[0].data == b"data!"


def test_a_refusal_appends_nothing_and_carries_the_reason() -> None:
    node = make_node()
    elect(node)
    last = node.core.last_index
    result = node.core.propose(rid(), b"bad", NOW_MS, Gate())
    assert isinstance(result, Refused) and str(result.reason) == "refused"
    assert node.core.last_index == last


def test_retries_and_followers_never_reach_the_gate() -> None:
    follower = make_node(term=1)
    gate = Gate()
    assert follower.core.propose(rid(), b"bad", NOW_MS, gate) == NotLeader(None)
    leader = make_node()
    elect(leader)
    request_id = rid()
    first = leader.core.propose(request_id, b"data", NOW_MS, gate)
    assert isinstance(first, Appended)
    assert leader.core.propose(request_id, b"bad", NOW_MS, gate) == Duplicate(first.index)
    assert gate.seen == [b"data"]
