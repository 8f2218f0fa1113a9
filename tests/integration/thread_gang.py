"""``ThreadGang``: load-generating threads that run until the ``with`` block ends.

Why: the load generators of the real-process tests (writers, flood clients) all start a
set of threads on entry and stop and join them on exit; one base class holds that, so a
generator only says what one thread does.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any, Self


class ThreadGang:
    """Threads running ``target(*args)`` for each ``args`` of ``work``, started on ``with``
    entry; on exit ``stopping`` is set and each is joined for up to ``join_timeout``."""

    def __init__(self, target: Callable[..., None], work: Sequence[tuple[Any, ...]], *,
                 join_timeout: float = 30.0, daemon: bool = True) -> None:
        self.stopping = threading.Event()
        self._join_timeout = join_timeout
        self._threads = [threading.Thread(target=target, args=args, daemon=daemon)
                         for args in work]

    def __enter__(self) -> Self:
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stopping.set()
        for thread in self._threads:
            thread.join(self._join_timeout)
