"""``TC`` record counts -- any peer, read-only: how many topic records the log holds per
index bucket, taken from the topic index, without reading a single entry.

Why: a reader that splits a log range into parallel tasks (the Spark source) must balance
them by records, not entries -- one ``publish_batch`` entry may hold 500 records, a plain
entry one. The peers already know every entry's record count per topic (the topic index,
``raftlog.topics.index``), so they can answer that at planning time in one
index scan instead of the planner reading the data.

    request   [id, "TC", ident, json {from_index, to_index, step, topics?, commits?,
                                    partial?, resume?}]
    response  [id, 01, json {applied, first_index, record_entries: [n, ...],
                             records: [n, ...], commits?: [[index, [[store, n], ...]], ...],
                             commits_to?: index, resume?: cursor}]
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

**Parts** (``partial: true``): counting reads index keys, and nothing bounds how many a range
holds -- 200,000 entries took ~0.5 s of the peer's loop in one answer, so a reader asking a
range of millions stalled its peer for seconds (an election per request). A peer reads at
most ``raftlog.topics.counting.COUNT_WORK`` keys per answer. A client that says it takes
partial answers gets, while counting is unfinished, an answer with ``resume`` (an opaque
cursor): it asks again with the same request and that ``resume``, and sums the parts'
buckets (:func:`merge_counts`; ``TopicClient.record_counts`` does it). The first part fixes
the last index counted (its ``applied`` or ``to_index``); ``commits`` come in log order
across the parts and the last part's ``commits_to`` holds for them all. A request without
``partial`` whose counting needs more answers than one is a ``BadRequest`` (narrow the range
or the topics, or take parts); a peer from before parts refuses the key (``BadRequest``
naming it), and the client then asks without it.
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

from raftlog.errors import RemoteProtocolError, TopicError
from raftlog.rpc.frames import TRUE_FRAME, decode_json, json_to_uint, pack_json
from raftlog.topics.records import MAX_UINT, check_topic_name
from raftlog.topics.wire import _integral, bad_request
from raftlog.topics.wire_errors import check_status

TYPE_COUNTS: Final = b"TC"
MAX_BUCKETS: Final = 16_384
MAX_COMMITS: Final = 16_384
MAX_COMMIT_STORES: Final = 65_536
"""Caps on the commits (and their stores) of one answer: it stays a few MiB at most."""
_KEYS: Final = frozenset(
    {"from_index", "to_index", "step", "topics", "commits", "partial", "resume"}
)
PHASE_ENTRIES: Final = 0
PHASE_RECORDS: Final = 1
PHASE_COMMITS: Final = 2

CommitStores = tuple[tuple[int, tuple[tuple[int, int], ...]], ...]
"""``((commit index, ((store index, records), ...)), ...)`` in log order."""


@dataclass(frozen=True, slots=True, order=True)
class CountsCursor:
    """Where an unfinished count goes on (``resume``): opaque to clients, which hand it back.

    Why these four: counting walks the record entries (``PHASE_ENTRIES``), then each topic's
    keys in name order (``PHASE_RECORDS``), then the commits (``PHASE_COMMITS``); a part stops
    inside one of them. ``upto`` is the last index counted, fixed by the first part so the
    parts count one range even while the log grows. Cursors order as the walk goes (a client
    refuses one that does not move forward: a peer cannot keep it asking forever)."""

    phase: int
    topic: str
    """``PHASE_RECORDS``: the topic to go on with (those before it in name order are done)."""
    index: int
    """The next index to look at in the phase (in ``topic`` for ``PHASE_RECORDS``)."""
    upto: int

    def encode(self) -> list[object]:
        return [self.phase, self.topic, self.index, self.upto]

    @classmethod
    def decode(cls, raw: object) -> CountsCursor:
        """A cursor from the wire (a peer decodes the client's, the client the peer's);
        anything else raises ``BadRequest``: every well-formed cursor costs bounded work."""
        if not isinstance(raw, list) or len(raw) != 4:
            raise bad_request("resume must be the cursor a partial counts answer gave")
        phase, topic, index, upto = (_integral(v) for v in raw)
        if type(phase) is not int or phase not in (PHASE_ENTRIES, PHASE_RECORDS, PHASE_COMMITS):
            raise bad_request("resume: unknown counting phase")
        if not isinstance(topic, str):
            raise bad_request("resume: the topic must be a name")
        if topic:
            check_topic_name(topic)
        for value in (index, upto):
            if type(value) is not int or not 0 <= value <= MAX_UINT:
                raise bad_request("resume: indexes must be integers in 0 .. 2^53-1")
        return cls(phase, topic, index, upto)


@dataclass(frozen=True, slots=True)
class CountsRequest:
    from_index: int
    to_index: int
    step: int = 1
    topics: tuple[str, ...] | None = None
    """Count the records of these topics only; None: every topic."""
    commits: bool = False
    """Also list the transaction commits of the range with their stores."""
    partial: bool = False
    """The client takes partial answers (``resume``) and asks again for the rest."""
    resume: CountsCursor | None = None
    """Go on where a partial answer to this request stopped."""

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
        if type(self.commits) is not bool or type(self.partial) is not bool:
            raise bad_request("commits and partial must be true or false")
        if self.resume is not None and not self.partial:
            raise bad_request("resume needs partial: true")

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
    resume: CountsCursor | None = None
    """A partial answer: ask again with this to count the rest (None: complete)."""


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
    if req.partial:
        body["partial"] = True
    if req.resume is not None:
        body["resume"] = req.resume.encode()
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
        body.get("partial", False),
        None if body.get("resume") is None else CountsCursor.decode(body["resume"]),
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
    if result.resume is not None:
        body["resume"] = result.resume.encode()
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
        _decode_cursor(body.get("resume")),
    )


def _decode_cursor(raw: object) -> CountsCursor | None:
    if raw is None:
        return None
    try:
        return CountsCursor.decode(raw)
    except TopicError as exc:
        raise RemoteProtocolError(f"counts answer: {exc}", 1) from None


def merge_counts(counted: CountsResult, part: CountsResult) -> CountsResult:
    """``counted`` (the parts so far) with the next ``part`` of the same request: buckets
    summed, commits in order. ``applied`` stays the first part's (it fixed the range);
    ``first_index`` is the highest a part saw, so the commits are complete from it to the
    last part's ``commits_to`` (counts may hold records below it that were compacted away
    between the parts). A part that does not move the cursor on is a protocol error."""
    if counted.resume is None or (part.resume is not None and part.resume <= counted.resume):
        raise RemoteProtocolError("a counts part did not move on from the last one", 1)
    if len(part.records) != len(counted.records):
        raise RemoteProtocolError("a counts part has other buckets than the first", 1)
    commits = counted.commits
    if part.commits is not None:
        commits = (commits or ()) + part.commits
    return CountsResult(
        counted.applied,
        max(counted.first_index, part.first_index),
        tuple(a + b for a, b in zip(counted.record_entries, part.record_entries, strict=True)),
        tuple(a + b for a, b in zip(counted.records, part.records, strict=True)),
        commits,
        part.commits_to,
        part.resume,
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
