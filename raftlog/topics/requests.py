"""The topic machine's request types, decoded, answered and encoded in one place.

Bad requests are answered with a typed error (``BadRequest``, ``UnknownTopic``,
``UnknownTransaction``...), never dropped: a client learns at once what was wrong.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Final, Protocol

from raftlog.errors import TopicError, transaction_error
from raftlog.topics import wire as rpc
from raftlog.topics import wire_counts as topic_counts
from raftlog.topics import wire_fetch
from raftlog.topics import wire_kv as kv_rpc
from raftlog.topics import wire_tx as tx_rpc
from raftlog.topics.groups.host import GroupHost
from raftlog.topics.groups.requests import GROUP_ANSWERS
from raftlog.topics.kv_state import KeyValueState
from raftlog.topics.state import TopicState
from raftlog.topics.wire_errors import encode_error


class TopicQueries(Protocol):
    """The reads of ``TopicStateMachine`` that the requests map to."""

    @property
    def topics(self) -> Mapping[str, TopicState]:
        """The applied topics."""
        ...

    def read(self, req: rpc.ReadRequest) -> rpc.ReadResult:
        """``TR``."""
        ...

    def list_answer(self, patterns: Sequence[str] | None) -> list[bytes]:
        """``TL``."""
        ...

    def describe(self, name: str) -> rpc.TopicInfo:
        """``TD``."""
        ...

    def counts(self, req: topic_counts.CountsRequest) -> topic_counts.CountsResult:
        """``TC``."""
        ...

    def transaction(self, txid: str) -> tx_rpc.TransactionInfo:
        """``TS``."""
        ...

    @property
    def kv(self) -> KeyValueState:
        """The compacted topics' keys (``KG``, ``KK``)."""
        ...

    @property
    def groups(self) -> GroupHost:
        """``GD``, ``GL``, ``GQ`` (issue #27)."""
        ...

    @property
    def last_applied(self) -> int:
        """The applied index."""
        ...

    @property
    def last_time(self) -> int:
        """The log clock."""
        ...


def _state(machine: TopicQueries, topic: str) -> TopicState:
    state = machine.topics.get(topic)
    if state is None:
        raise TopicError("UnknownTopic", f"topic {topic!r} does not exist")
    return state


def _kv_get(machine: TopicQueries, args: Sequence[bytes]) -> list[bytes]:
    topic, key = kv_rpc.decode_get_request(args)
    kv = machine.kv
    record = kv.get(topic, _state(machine, topic), key, machine.last_time)
    result = kv_rpc.GetResult(record, machine.last_applied, kv.is_leader)
    return kv_rpc.encode_get_response(result)


def _kv_keys(machine: TopicQueries, args: Sequence[bytes]) -> list[bytes]:
    req = kv_rpc.decode_keys_request(args)
    kv = machine.kv
    state = _state(machine, req.topic)
    keys, more, resume = kv.keys(
        req.topic, state, req.prefix, req.after, req.limit, clock_ms=machine.last_time
    )
    result = kv_rpc.KeysResult(tuple(keys), more, machine.last_applied, kv.is_leader, resume)
    return kv_rpc.encode_keys_response(result)


def _read(machine: TopicQueries, args: Sequence[bytes]) -> list[bytes]:
    return rpc.encode_read_response(machine.read(rpc.decode_read_request(args)))


def _describe(machine: TopicQueries, args: Sequence[bytes]) -> list[bytes]:
    return rpc.encode_describe_response(machine.describe(rpc.decode_describe_request(args)))


def _list(machine: TopicQueries, args: Sequence[bytes]) -> list[bytes]:
    return machine.list_answer(rpc.decode_list_request(args))


def _status(machine: TopicQueries, args: Sequence[bytes]) -> list[bytes]:
    txid, actor = tx_rpc.decode_status_request(args)
    info = machine.transaction(txid)
    if actor is not None and not actor.may_act_for(info.owner):
        raise transaction_error(
            "TransactionNotOwned", f"transaction {txid!r} belongs to another principal", txid
        )
    return tx_rpc.encode_status_response(info)


def _fetch(machine: TopicQueries, args: Sequence[bytes]) -> list[bytes]:
    req = wire_fetch.decode_fetch_request(args)
    return rpc.encode_read_response(req.within_credit(machine.read(req.read)))


def _counts(machine: TopicQueries, args: Sequence[bytes]) -> list[bytes]:
    return topic_counts.encode_counts_response(
        machine.counts(topic_counts.decode_counts_request(args))
    )


ANSWERS: Final[Mapping[bytes, Callable[[TopicQueries, Sequence[bytes]], list[bytes]]]] = {
    rpc.TYPE_READ: _read,
    rpc.TYPE_DESCRIBE: _describe,
    rpc.TYPE_LIST: _list,
    tx_rpc.TYPE_TX_STATUS: _status,
    topic_counts.TYPE_COUNTS: _counts,
    kv_rpc.TYPE_KV_GET: _kv_get,
    kv_rpc.TYPE_KV_KEYS: _kv_keys,
    wire_fetch.TYPE_FETCH: _fetch,
    **GROUP_ANSWERS,
}
"""The topic read requests the machine answers: one lookup, no chain of comparisons (the
registry, ``raftlog.registry``, routes these types to the state machine)."""


def answer_request(
    machine: TopicQueries, msg_type: bytes, args: Sequence[bytes]
) -> list[bytes] | None:
    """The answer frames to a topic request (None: not a topic request type)."""
    answer = ANSWERS.get(msg_type)
    if answer is None:
        return None
    try:
        return answer(machine, args)
    except TopicError as exc:
        return encode_error(exc)
