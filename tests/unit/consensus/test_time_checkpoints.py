"""Time checkpoints: how the cluster clock enters the log (issue #24)."""

from __future__ import annotations

from consensus_helpers import elect, make_node

from raftlog.entry import ZERO_REQUEST_ID, EntryType, decode_time_checkpoint


def test_only_a_leader_stamps_time_checkpoints_and_they_carry_no_request_id() -> None:
    """Issue #24: the cluster clock enters the log as CHECKPOINT entries (core stays pure)."""
    follower = make_node(term=1)
    assert follower.core.stamp_time(1_700_000_000_000) is None
    node = make_node(term=1)
    elect(node)
    index = node.core.stamp_time(1_700_000_000_000)
    assert index == node.core.last_index
    node.run()
    (stamped,) = node.log.entries(index, index + 1)
    assert stamped.entry_type == EntryType.CHECKPOINT and stamped.request_id == ZERO_REQUEST_ID
    assert decode_time_checkpoint(stamped.data) == 1_700_000_000_000
