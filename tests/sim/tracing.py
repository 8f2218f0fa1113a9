"""A ring buffer of the last simulator events, rendered only when a run fails."""

from __future__ import annotations

from collections import deque


class Trace:
    def __init__(self, size: int = 200) -> None:
        self.events: deque[tuple[int, str, tuple[object, ...]]] = deque(maxlen=size)
        self.tick = 0

    def add(self, kind: str, *args: object) -> None:
        self.events.append((self.tick, kind, args))

    def render(self) -> str:
        lines = []
        for tick, kind, args in self.events:
            lines.append(f"{tick:6d} {kind:<14} " + " ".join(_short(a) for a in args))
        return "\n".join(lines)


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 160 else text[:157] + "..."
