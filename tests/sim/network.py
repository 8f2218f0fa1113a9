"""A simulated, seeded network: per-link loss, duplication, delay (hence reordering) and cuts.

Messages sit in a heap ordered by ``(deliver_tick, seq)``; ``due(now)`` pops what arrives at
``now``. A cut link drops a message both when it is sent and when it would arrive, so a
partition also swallows what was in flight (as a broken TCP connection would). Every choice
comes from the injected ``random.Random``.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass
from random import Random


@dataclass(frozen=True)
class LinkRule:
    drop: float = 0.0
    duplicate: float = 0.0
    delay: tuple[int, int] = (1, 3)


class SimNetwork:
    def __init__(self, rng: Random, default: LinkRule) -> None:
        self.rng = rng
        self.default = default
        self.rules: dict[tuple[str, str], LinkRule] = {}
        self.cut: set[tuple[str, str]] = set()
        self._heap: list[tuple[int, int, str, str, object]] = []
        self._seq = 0
        self.sent = 0
        self.dropped = 0

    # -- traffic --------------------------------------------------------------------------
    def send(self, now: int, src: str, dst: str, payload: object) -> None:
        self.sent += 1
        if (src, dst) in self.cut:
            self.dropped += 1
            return
        rule = self.rules.get((src, dst), self.default)
        rng = self.rng
        if rule.drop and rng.random() < rule.drop:
            self.dropped += 1
            return
        copies = 2 if rule.duplicate and rng.random() < rule.duplicate else 1
        low, high = rule.delay
        for _ in range(copies):
            self._seq += 1
            at = now + (low if low == high else rng.randint(low, high))
            heapq.heappush(self._heap, (at, self._seq, src, dst, payload))

    def due(self, now: int) -> list[tuple[str, str, object]]:
        heap = self._heap
        arrived: list[tuple[str, str, object]] = []
        while heap and heap[0][0] <= now:
            _, _, src, dst, payload = heapq.heappop(heap)
            if (src, dst) in self.cut:
                self.dropped += 1
                continue
            arrived.append((src, dst, payload))
        return arrived

    @property
    def in_flight(self) -> int:
        return len(self._heap)

    # -- faults ---------------------------------------------------------------------------
    def partition(self, *groups: set[str]) -> None:
        """Cut every link between different groups, both ways."""
        for a_index, group_a in enumerate(groups):
            for group_b in groups[a_index + 1 :]:
                for a in group_a:
                    for b in group_b:
                        self.cut.add((a, b))
                        self.cut.add((b, a))

    def cut_one_way(self, src: str, dst: str) -> None:
        self.cut.add((src, dst))

    def isolate(self, node: str, everyone: set[str]) -> None:
        self.partition({node}, everyone - {node})

    def set_rule(self, src: str, dst: str, rule: LinkRule) -> None:
        self.rules[(src, dst)] = rule

    def heal(self) -> None:
        """Restore every link and every per-link rule to the default."""
        self.cut.clear()
        self.rules.clear()
