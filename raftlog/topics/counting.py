"""``TC`` record counts, one bounded part at a time (``raftlog.topics.wire_counts``).

Why a walk with a budget: counts come from the topic index without reading entries, but
still one index key per record entry and per (entry, topic) -- ~2.5 µs each on the peer's
loop, and nothing bounds how many a range holds or how many topics "every topic" is. One
answer for 200,000 entries held the loop ~0.5 s; millions held it for seconds, long enough
for the followers to elect. Here an answer reads at most ``COUNT_WORK`` keys (a topic's
retention floors count as ``TOPIC_WORK``) and says where to go on (``CountsCursor``).

The walk goes in three phases, each resumable where it stopped: the record entries of the
range (``i`` keys), then each topic's record keys in name order (``r`` keys, from the
topic's retention start: the same floors as a read), then -- when asked -- the transaction
commits (``t`` keys). Buckets are only ever added to, so the parts' sums are the count of
the whole range whatever the cut.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterator, Sequence
from typing import Final, Protocol

from raftlog.topics import wire_counts as tc
from raftlog.topics.state import TopicState
from raftlog.topics.wire import bad_request

COUNT_WORK: Final = 10_000
"""Index keys one answer reads at most: ~9 ms of the loop on the machines measured (a
million entries are 100 answers of it; the client asks them one after the other)."""
TOPIC_WORK: Final = 8
"""What finding one topic's retention start counts as: a few seeks, and for a size window
the decode of one entry."""

Start = Callable[[str, TopicState], int]
"""The first index of a topic's retained records (``TopicReader.start``, bound to the clock)."""


class IndexKeys(Protocol):
    """What the walk reads of the topic index (``raftlog.topics.index.TopicIndex``)."""

    def record_entries(self, lo: int, hi: int) -> Iterator[int]: ...

    def record_counts(self, topic: str, lo: int, hi: int) -> Iterator[tuple[int, int]]: ...

    def commits_in(self, lo: int, hi: int) -> Iterator[tuple[int, list[tuple[int, int]]]]: ...

    def entry(self, topic: str, index: int) -> object | None: ...


class CountingWalk:
    """One part of one ``TC`` request: walk from the request's cursor until the range is
    counted or ``budget`` keys are read (module docstring)."""

    def __init__(
        self,
        req: tc.CountsRequest,
        index: IndexKeys,
        applied: int,
        first_index: int,
        budget: int = COUNT_WORK,
    ) -> None:
        if budget <= TOPIC_WORK:
            raise ValueError(f"a counting budget must pass {TOPIC_WORK}: parts must move on")
        self._req = req
        self._index = index
        self._budget = budget
        self.work = 0
        """Keys read so far (a topic's floors as ``TOPIC_WORK``)."""
        upto = min(req.to_index, applied)
        if req.resume is not None:
            upto = min(upto, req.resume.upto)
        self.upto = upto
        self.lo = max(req.from_index, first_index)
        self.entries = [0] * req.buckets
        self.records = [0] * req.buckets
        self.commits: list[tuple[int, tuple[tuple[int, int], ...]]] = []
        self.commits_to = upto
        self.stopped: tc.CountsCursor | None = None
        """Where the walk ran out of budget (None: it counted the rest of the range)."""

    def _out_of_budget(self, cost: int = 1) -> bool:
        """Whether ``cost`` more keys pass the budget. The first item of a part always fits,
        and a topic's floors are taken only with room for one key after them, so every part
        moves on."""
        return self.work > 0 and self.work + cost > self._budget

    def _stop(self, phase: int, index: int, topic: str = "") -> None:
        self.stopped = tc.CountsCursor(phase, topic, index, self.upto)

    def _cut_commits(self, index: int) -> bool:
        """The commits end before ``index``: the next part goes on from it (partial), or the
        answer says where its list ends (``commits_to``)."""
        if self._req.partial:
            self._stop(tc.PHASE_COMMITS, index)
        self.commits_to = index - 1
        return False

    # -- the phases ------------------------------------------------------------------------
    def count_entries(self, start: int) -> bool:
        """The record entries of ``[start, upto]`` per bucket; False: out of budget."""
        bucket_of, entries = self._req.bucket_of, self.entries
        for index in self._index.record_entries(max(start, self.lo), self.upto):
            if self._out_of_budget():
                self._stop(tc.PHASE_ENTRIES, index)
                return False
            self.work += 1
            entries[bucket_of(index)] += 1
        return True

    def count_records(
        self, names: Sequence[str], state_of: Callable[[str], TopicState | None], start: Start
    ) -> bool:
        """Each topic's records per bucket, in name order from the cursor's topic;
        ``names`` is sorted. False: out of budget."""
        resume = self._req.resume
        at, begin = 0, self.lo
        if resume is not None and resume.phase == tc.PHASE_RECORDS:
            at = bisect.bisect_left(names, resume.topic)
            if at < len(names) and names[at] == resume.topic:
                begin = max(begin, resume.index)
        bucket_of, records = self._req.bucket_of, self.records
        for name in names[at:]:
            state = state_of(name)  # None: deleted since the first part
            if state is not None:
                if self._out_of_budget(TOPIC_WORK + 1):  # room for one key after it
                    self._stop(tc.PHASE_RECORDS, begin, name)
                    return False
                self.work += TOPIC_WORK
                first = max(begin, start(name, state))
                for index, count in self._index.record_counts(name, first, self.upto):
                    if self._out_of_budget():
                        self._stop(tc.PHASE_RECORDS, index, name)
                        return False
                    self.work += 1
                    records[bucket_of(index)] += count
            begin = self.lo
        return True

    def list_commits(self, start: int, wanted: Sequence[str] | None) -> bool:
        """The commits of ``[start, upto]`` that made records of ``wanted`` (None: any topic)
        visible, with their stores. A part's list is capped (``MAX_COMMITS``,
        ``MAX_COMMIT_STORES``): a partial request goes on in the next part, an old-style one
        gets the list cut (``commits_to``), as before parts. False: stopped early."""
        listed = 0
        cost = 1 + (0 if wanted is None else len(wanted))
        for index, stores in self._index.commits_in(max(start, self.lo), self.upto):
            if self._out_of_budget(cost):
                return self._cut_commits(index)
            self.work += cost
            if wanted is not None and all(self._index.entry(t, index) is None for t in wanted):
                continue
            listed += len(stores)
            if len(self.commits) == tc.MAX_COMMITS or listed > tc.MAX_COMMIT_STORES:
                return self._cut_commits(index)
            self.commits.append((index, tuple(stores)))
        return True


def count_part(
    req: tc.CountsRequest,
    index: IndexKeys,
    topics: tuple[Sequence[str], Callable[[str], TopicState | None]],
    start: Start,
    position: tuple[int, int],
    *,
    budget: int = COUNT_WORK,
) -> tc.CountsResult:
    """One answer to ``req``: ``topics`` are the names to count in order and their states,
    ``position`` the peer's ``(applied, first log index)``. A request without ``partial``
    that needs more than one part is a ``BadRequest``."""
    applied, first_index = position
    walk = CountingWalk(req, index, applied, first_index, budget)
    resume = req.resume or tc.CountsCursor(tc.PHASE_ENTRIES, "", 0, walk.upto)
    names, state_of = topics
    done = walk.lo > walk.upto or (
        (resume.phase > tc.PHASE_ENTRIES or walk.count_entries(resume.index))
        and (resume.phase > tc.PHASE_RECORDS or walk.count_records(names, state_of, start))
    )
    if done and req.commits:
        wanted = None if req.topics is None else names
        commits_from = resume.index if resume.phase == tc.PHASE_COMMITS else 0
        walk.list_commits(commits_from, wanted)
    if walk.stopped is not None and not req.partial:
        raise bad_request(
            f"counting this range reads more than {budget} index keys: take partial answers "
            "(partial: true, then resume), or ask a smaller range or fewer topics"
        )
    return tc.CountsResult(
        applied,
        first_index,
        tuple(walk.entries),
        tuple(walk.records),
        tuple(walk.commits) if req.commits else None,
        max(walk.commits_to, 0) if req.commits else 0,
        walk.stopped,
    )
