"""``TC`` record counts -- any peer, read-only: how many topic records the log holds per
index bucket, taken from the topic index, without reading a single entry.

Why: a reader that splits a log range into parallel tasks (the Spark source) must balance
them by records, not entries -- one ``publish_batch`` entry may hold 500 records, a plain
entry one. The peers already know every entry's record count per topic (the topic index,
``raftlog.topics.index``), so they can answer that at planning time in one
index scan instead of the planner reading the data.

    request   [id, "TC", ident, json {from_index, to_index, step, topics?, commits?}]
    response  [id, 01, json {applied, first_index, record_entries: [n, ...],
                             records: [n, ...], commits?: [[index, [[store, n], ...]], ...],
                             commits_to?: index}]
              [id, "", json error]

Bucket ``k`` covers indexes ``from_index + k*step .. from_index + (k+1)*step - 1`` (the last
one ends at ``to_index``); ``record_entries[k]`` counts the topic record entries in it
(whatever their topics), ``records[k]`` the records of ``topics`` (all topics when absent)
in it. The other entries of a bucket are raw STATE, CONFIG, CHECKPOINT or admin entries.
At most ``MAX_BUCKETS`` buckets. With ``commits: true`` the answer also lists the
transaction commits in the range that made records visible, each with its stores
``(store index, records)`` in order (issue #31: a reader resolves every commit of its range
from one answer instead of one ``TR`` per commit and topic); at most ``MAX_COMMITS`` of
them (``MAX_COMMIT_STORES`` stores), and ``commits_to`` is the last index the list is
complete up to. A peer from before ``commits`` refuses the key (``BadRequest``); the reader
then asks without it.
``applied`` is the responder's applied index (nothing after it is counted), ``first_index``
its first log index (nothing before it is counted).

Counts follow the topic read rules of the peer (``TopicStateMachine``): an unknown topic is
an ``UnknownTopic`` error, and records past their retention or compacted away are not
counted. A peer without ``TC`` (the reference, or an older raftlog) drops the request.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from raftlog.errors import RemoteProtocolError
from raftlog.rpc.frames import TRUE_FRAME, decode_json, json_to_uint, pack_json
from raftlog.topics.records import MAX_UINT, check_topic_name
from raftlog.topics.wire import _integral, bad_request
from raftlog.topics.wire_errors import check_status

TYPE_COUNTS: Final = b"TC"
MAX_BUCKETS: Final = 16_384
MAX_COMMITS: Final = 16_384
MAX_COMMIT_STORES: Final = 65_536
"""Caps on the commits (and their stores) of one answer: it stays a few MiB at most."""
_KEYS: Final = frozenset({"from_index", "to_index", "step", "topics", "commits"})

CommitStores = tuple[tuple[int, tuple[tuple[int, int], ...]], ...]
"""``((commit index, ((store index, records), ...)), ...)`` in log order."""


@dataclass(frozen=True, slots=True)
class CountsRequest:
    from_index: int
    to_index: int
    step: int = 1
    topics: tuple[str, ...] | None = None
    """Count the records of these topics only; None: every topic."""
    commits: bool = False
    """Also list the transaction commits of the range with their stores."""

    def __post_init__(self) -> None:
        for name in ("from_index", "to_index", "step"):
            value = getattr(self, name)
            if type(value) is not int or not 0 <= value <= MAX_UINT:
                raise bad_request(f"{name} must be an integer in 0 .. 2^53-1")
        if self.step < 1:
            raise bad_request("step must be at least 1")
        if self.to_index < self.from_index:
            raise bad_request("to_index must not be below from_index")
        if self.buckets > MAX_BUCKETS:
            raise bad_request(f"at most {MAX_BUCKETS} buckets: use a larger step")
        if self.topics is not None:
            for topic in self.topics:
                check_topic_name(topic)
        if type(self.commits) is not bool:
            raise bad_request("commits must be true or false")

    @property
    def buckets(self) -> int:
        return (self.to_index - self.from_index) // self.step + 1

    def bucket_of(self, index: int) -> int:
        return (index - self.from_index) // self.step


@dataclass(frozen=True, slots=True)
class CountsResult:
    applied: int
    first_index: int
    record_entries: tuple[int, ...]
    records: tuple[int, ...]
    commits: CommitStores | None = None
    """The commits of the range (only when asked for)."""
    commits_to: int = 0
    """``commits`` is complete up to this index (the range's end unless cut short)."""


def encode_counts_request(req: CountsRequest) -> list[bytes]:
    body: dict[str, object] = {
        "from_index": req.from_index,
        "to_index": req.to_index,
        "step": req.step,
    }
    if req.topics is not None:
        body["topics"] = list(req.topics)
    if req.commits:
        body["commits"] = True
    return [pack_json(body)]


def decode_counts_request(args: Sequence[bytes]) -> CountsRequest:
    """The server side; a malformed request raises ``TopicError`` (answered, not dropped)."""
    if len(args) != 1:
        raise bad_request(f"a counts request has one argument frame, got {len(args)}")
    try:
        body = decode_json(args[0], 3)
    except RemoteProtocolError as exc:
        raise bad_request(str(exc)) from None
    if not isinstance(body, dict) or not {"from_index", "to_index"} <= set(body):
        raise bad_request("a counts request is a map with from_index and to_index")
    unknown = set(body) - _KEYS
    if unknown:
        raise bad_request(f"unknown counts request keys: {sorted(map(str, unknown))}")
    topics = body.get("topics")
    if topics is not None and (
        not isinstance(topics, list) or not all(isinstance(t, str) for t in topics)
    ):
        raise bad_request("topics must be a list of names")
    return CountsRequest(
        _integral(body["from_index"]),
        _integral(body["to_index"]),
        _integral(body.get("step", 1)),
        None if topics is None else tuple(topics),
        body.get("commits", False),
    )


def encode_counts_response(result: CountsResult) -> list[bytes]:
    body = {
        "applied": result.applied,
        "first_index": result.first_index,
        "record_entries": list(result.record_entries),
        "records": list(result.records),
    }
    if result.commits is not None:
        body["commits"] = [[index, [list(s) for s in stores]] for index, stores in result.commits]
        body["commits_to"] = result.commits_to
    return [TRUE_FRAME, pack_json(body)]


def decode_counts_response(frames: Sequence[bytes]) -> CountsResult:
    """The frames after the id; an error answer raises its ``TopicError``."""
    check_status(frames, 1)
    body = decode_json(frames[1], 1)
    if not isinstance(body, dict):
        raise RemoteProtocolError("counts must be a map", 1)
    entries, records = body.get("record_entries"), body.get("records")
    if not isinstance(entries, list) or not isinstance(records, list):
        raise RemoteProtocolError("counts need record_entries and records lists", 1)
    if len(entries) != len(records):
        raise RemoteProtocolError("record_entries and records differ in length", 1)
    return CountsResult(
        json_to_uint(body.get("applied"), 1, "applied"),
        json_to_uint(body.get("first_index"), 1, "first_index"),
        tuple(json_to_uint(n, 1, "record_entries") for n in entries),
        tuple(json_to_uint(n, 1, "records") for n in records),
        _decode_commits(body.get("commits")),
        json_to_uint(body.get("commits_to", 0), 1, "commits_to"),
    )


def _decode_commits(raw: object) -> CommitStores | None:
    """The ``commits`` list of an answer (None: not asked for, or an older peer)."""
    if raw is None:
        return None
    try:
        return tuple(
            (
                json_to_uint(index, 1, "commits"),
                tuple(
                    (json_to_uint(s, 1, "commits"), json_to_uint(n, 1, "commits"))
                    for s, n in stores
                ),
            )
            for index, stores in raw  # type: ignore[attr-defined]
        )
    except (TypeError, ValueError):
        raise RemoteProtocolError("commits must be [[index, [[store, n], ...]], ...]", 1) from None
