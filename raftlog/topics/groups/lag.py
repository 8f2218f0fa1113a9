"""Consumer groups' lag for monitoring, counted a bounded slice per status view.

Why: a group's lag (records after its committed position or cursor) has no cheap answer --
the topic index keeps one key per entry and topic, not running record counts -- so it is
counted by walking the topic's keys from the position. The status view (every 200 ms, on
the peer's loop) counted every shown group's lag in full, up to 100,000 entries per group and
topic: one stream group stopped 200,000 single-record entries behind cost ~0.5 s per view,
five such groups 1.8 s -- a loop never free, a cluster electing -- and a stopped consumer
is an everyday event.

Here each (group, topic) has a *scan* that walks from its position towards the log's end and
resumes where it stopped at the next view; the view shows the last completed count. One
view spends at most ``LAG_SCAN_BUDGET`` units (an entry walked is one, starting or resuming
a scan a seek's worth), beginning where the previous view stopped, so every lag is counted
again within a bounded number of views however many groups lag and by how much. A scan
that walks ``LAG_SCAN_CAP`` entries ends there: that lag shows as at least what it counted.
A position that moved (a commit) starts the scan over from it.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Final, Protocol

from raftlog.topics.index import EntryRecords
from raftlog.topics.records import RecordId

__all__ = ["LAG_SCAN_BUDGET", "LAG_SCAN_CAP", "LagCounts", "LagSource"]

LAG_SCAN_CAP: Final = 100_000
"""Entries one count of one group's lag on one topic walks at most."""
LAG_SCAN_BUDGET: Final = 1_024
"""Units one status view spends on lags (an entry walked is one: ~5 ms of the loop, five
views a second, so a lag of ``LAG_SCAN_CAP`` entries is counted again in ~20 s)."""
SEEK_UNITS: Final = 8
"""What starting or resuming a scan costs (an index seek, and the retention start)."""

LagKey = tuple[str, str]
"""``(group, topic)``."""


class LagSource(Protocol):
    """What the scans read of the topics (``raftlog.topics.groups.host.IndexRecords``)."""

    def start(self, topic: str) -> RecordId:
        """The topic's first retained record id."""
        ...

    def entries_from(self, topic: str, index: int) -> Iterator[EntryRecords]:
        """The topic's index entries from log index ``index`` on, in order."""
        ...


@dataclass(slots=True)
class _Scan:
    origin: RecordId
    """The position the lag is counted from."""
    resume: RecordId
    """Where the walk goes on (records before it are counted)."""
    counted: int = 0
    walked: int = 0


class LagCounts:
    """Lags of the groups a status view shows, each refreshed a slice at a time."""

    def __init__(self, budget: int = LAG_SCAN_BUDGET, cap: int = LAG_SCAN_CAP) -> None:
        self._budget = budget
        self._cap = cap
        self._known: dict[LagKey, int] = {}
        self._scans: dict[LagKey, _Scan] = {}
        self._offset = 0

    def refresh(
        self, wanted: Sequence[tuple[str, str, RecordId]], source: LagSource
    ) -> dict[LagKey, int]:
        """The lag of each wanted ``(group, topic, position)`` (0 until first counted), after
        spending at most the budget on the scans, from where the last call stopped."""
        origins = {(group, topic): origin for group, topic, origin in wanted}
        for stale in [key for key in self._scans if key not in origins]:
            del self._scans[stale]
        for stale in [key for key in self._known if key not in origins]:
            del self._known[stale]
        keys = list(origins)
        left, visited = self._budget, 0
        while left > 0 and visited < len(keys):
            key = keys[(self._offset + visited) % len(keys)]
            left -= self._advance(key, origins[key], source, left)
            visited += 1
        self._offset = (self._offset + visited) % len(keys) if keys else 0
        return {key: self._known.get(key, 0) for key in keys}

    def _advance(self, key: LagKey, origin: RecordId, source: LagSource, left: int) -> int:
        """Walk ``key``'s scan for at most ``left`` units; the units spent."""
        scan = self._scans.get(key)
        if scan is None or scan.origin != origin:
            scan = self._scans[key] = _Scan(origin, max(origin, source.start(key[1])))
        spent = SEEK_UNITS
        entries = source.entries_from(key[1], scan.resume.index)
        for entry in entries:
            if spent >= left and scan.walked < self._cap:
                return spent  # the budget ran out: resume here at a later view
            if scan.walked >= self._cap:
                break
            resume = scan.resume
            if entry.index > resume.index:
                scan.counted += len(entry.positions)
            else:  # the entry the position is in: only the records from it on
                scan.counted += sum(1 for p in entry.positions if p >= resume.position)
            scan.resume = RecordId(entry.index + 1, 0)
            scan.walked += 1
            spent += 1
        self._known[key] = scan.counted  # at the end (or the cap): the count is complete
        del self._scans[key]
        return spent
