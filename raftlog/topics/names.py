"""Topic (and group) names in order, and the names a filter matches, without a walk per ask.

Why a home of its own: listing topics (``TL``: the admin CLI, REST, a pattern follow, every
Kafka Metadata request for all topics) and groups (``GL``), and the status view's first
names, are answered by the peer's loop, and nothing bounds how many topics or groups there
are or how often a client asks. Sorting and encoding 50,000 names took ~31 ms of the loop
per request, and a filter was matched name by name against every pattern -- O(names x
patterns) for a request of any size. Here the names are sorted, and the unfiltered answer
encoded, once per change of the set; a filter is answered by one look-up per exact name and
one binary search per ``prefix*`` pattern (prefixes another one covers are dropped first),
so a request costs what it asks for and what it returns.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterable, Mapping, Sequence

__all__ = ["SortedNames"]

ListEncoder = Callable[[Sequence[str]], list[bytes]]
"""A list answer's encoder (``TL``'s or ``GL``'s ``encode_list_response``)."""


class SortedNames:
    """The sorted names of a mapping, kept until :meth:`changed` says the set moved."""

    def __init__(self) -> None:
        self._sorted: list[str] | None = None
        self._all_frames: list[bytes] | None = None

    def changed(self) -> None:
        """A name came or went, or every one was replaced (a snapshot restore)."""
        self._sorted = None
        self._all_frames = None

    def sorted(self, topics: Mapping[str, object]) -> list[str]:
        """Every name of ``topics`` in order (kept: do not modify)."""
        if self._sorted is None:
            self._sorted = sorted(topics)
        return self._sorted

    def matching(self, topics: Mapping[str, object], patterns: Iterable[str]) -> list[str]:
        """The names of ``topics`` equal to a pattern or starting with a ``prefix*`` one's
        prefix (the rule of ``raftlog.security.policy.TopicFilter``), in order."""
        exact: set[str] = set()
        prefixes: list[str] = []
        for pattern in set(patterns):
            if pattern.endswith("*"):
                prefixes.append(pattern[:-1])
            elif pattern in topics:
                exact.add(pattern)
        names = self.sorted(topics)
        found: set[str] = set(exact)
        for prefix in _widest(prefixes):
            at = bisect.bisect_left(names, prefix)
            while at < len(names) and names[at].startswith(prefix):
                found.add(names[at])
                at += 1
        return sorted(found)

    def list_answer(
        self, topics: Mapping[str, object], patterns: Sequence[str] | None, encode: ListEncoder
    ) -> list[bytes]:
        """A list request's answer frames: every name, or those ``patterns`` match, in
        order (the unfiltered one encoded once per change of the set)."""
        if patterns is not None:
            return encode(self.matching(topics, patterns))
        if self._all_frames is None:
            self._all_frames = encode(self.sorted(topics))
        return list(self._all_frames)


def _widest(prefixes: Iterable[str]) -> list[str]:
    """The prefixes no other one of them covers (``"a"`` covers ``"ab"``), in order: each
    name is then found under one prefix only."""
    kept: list[str] = []
    for prefix in sorted(set(prefixes)):
        if not kept or not prefix.startswith(kept[-1]):
            kept.append(prefix)
    return kept
