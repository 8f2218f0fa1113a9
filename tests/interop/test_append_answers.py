"""A raftlog follower's AppendEntries answers, read by the reference leader's own decoder.

Why: a raftlog follower marks its successful answers (docs/protocol.md §8, "pipelining
mark") so that a raftlog leader pipelines only to followers that take it. The reference's
leader must still read every such answer exactly as the reference's own ``[term, true]``:
it decodes the first four body frames (term, success and two ``uint`` frames) and ignores
the rest. The mixed-cluster tests show it end to end when a reference peer happens to lead;
this pins the frames themselves against the decoder the reference's leader runs
(``createFramesProtocol('AppendEntries').decodeResponse``), including why the mark is not
sent straight after the success frame: an empty ``uint`` frame loses the whole answer.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from reference import NodeScriptError, run_node_script

from raftlog.rpc.messages import AppendEntriesResponse
from raftlog.rpc.responses import encode_response

DECODE = r"""
const { createFramesProtocol } = require('zmq-raft/lib/protocol');
const protocol = createFramesProtocol('AppendEntries');
const decoded = protocol.decodeResponse(P.frames.map(unhex));
done({decoded});
"""


def _decode_with_reference(frames: list[bytes]) -> list[object]:
    result = run_node_script(DECODE, params={"frames": [f.hex() for f in frames]})
    decoded = result["decoded"]
    assert isinstance(decoded, list)
    return decoded


def _body(answer: AppendEntriesResponse) -> list[bytes]:
    return encode_response(answer, id=b"\x01")[1:]


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        (AppendEntriesResponse(7, True, pipelines=True), [7, True, 0, 0]),
        (AppendEntriesResponse(7, True), [7, True, None, None]),
        (AppendEntriesResponse(7, False, 301), [7, False, 301, None]),
        (AppendEntriesResponse(7, False), [7, False, None, None]),
    ],
)
def test_the_reference_leader_reads_every_raftlog_answer(
    reference_installed: Path, answer: AppendEntriesResponse, expected: list[object]
) -> None:
    # the schema's four values (absent ones null); nothing of the mark reaches the leader,
    # and on a success it reads neither integer (raft_leader.js: only a failure does)
    assert _decode_with_reference(_body(answer)) == expected


def test_an_empty_frame_where_the_reference_expects_a_uint_loses_the_answer(
    reference_installed: Path,
) -> None:
    """Why the mark follows two zeros: placed right after the success frame, or after an
    empty frame, the reference's decoder throws and the answer is lost."""
    term, success = _body(AppendEntriesResponse(7, True))
    with pytest.raises(NodeScriptError, match="unsigned integer must not be null"):
        _decode_with_reference([term, success, b""])
