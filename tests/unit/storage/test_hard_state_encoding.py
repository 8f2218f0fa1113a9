"""The hard-state record's encoding keeps its bytes while it reuses its first four pairs.

``encode_hard_state`` caches the packed ``term, vote, config, config_index`` pairs between
calls (every applied batch rewrites the record with a new ``last_applied`` only); the record
must stay byte for byte what packing the whole map gives, whatever changes between calls.
"""

from __future__ import annotations

import msgpack

from raftlog.rpc.messages import ConfigPayload, Peer
from raftlog.storage import _records as rec
from raftlog.storage.base import HardState

CONFIG = ConfigPayload(new=(Peer("1", "tcp://a:1"), Peer("2", "tcp://b:2")))
JOINT = ConfigPayload(new=(Peer("3", "tcp://c:3"),), old=CONFIG.new)


def _whole_map(state: HardState) -> bytes:
    config = state.config
    body = msgpack.packb(
        {
            "term": state.current_term,
            "vote": state.voted_for,
            "config": None
            if config is None
            else {
                "new": [[p.id, p.url] for p in config.new],
                "old": None if config.old is None else [[p.id, p.url] for p in config.old],
            },
            "config_index": state.config_index,
            "last_applied": state.last_applied,
        },
        use_bin_type=True,
    )
    return rec.seal(rec.HARD_STATE_KEY, body)


def test_each_record_is_the_whole_map_packed_whatever_changed_since_the_last() -> None:
    states = [
        HardState(),
        HardState(5, "2", CONFIG, 3, 7),
        HardState(5, "2", CONFIG, 3, 200),  # only last_applied moves: the cached head
        HardState(5, "2", CONFIG, 3, 70_000),
        HardState(5, "2", CONFIG, 3, 2**40),
        HardState(6, None, CONFIG, 3, 2**40),  # the term moves
        HardState(6, "1", CONFIG, 3, 2**40),  # the vote
        HardState(6, "1", JOINT, 9, 2**40),  # the configuration
        HardState(2**47, "x" * 40, None, 0, 0),
        HardState(5, "2", CONFIG, 3, 7),  # back to an earlier head
    ]
    for state in states:
        encoded = rec.encode_hard_state(state)
        assert encoded == _whole_map(state), state
        assert rec.decode_hard_state(encoded) == state
