"""Python's cyclic garbage collector in Spark's Python workers, kept off the read path.

Why: measured on issue #17's data set (1.1M records, ``local[2]``), the collector took
about a fifth of the Python workers' CPU time, none of it finding garbage worth the cost:

* PySpark's worker daemon runs a *full* ``gc.collect()`` after every task of a reused
  worker (``pyspark/daemon.py``). A worker holds pyspark, pandas, pyarrow and raftlog, so
  each of those collections walks ~90,000 long-lived objects (module contents): ~40 ms of
  CPU per task and per planning call, before the worker takes its next one.
  :func:`settle_worker_heap` -- after the source's first call in a process, when its
  imports (some happen during that call) are done -- collects once, then moves every
  object still alive into the permanent generation (``gc.freeze``), which collections
  skip. Objects created later are collected as before.
* Decoding allocates a list per record (the MessagePack body of a record batch), so the
  collector's young-generation passes ran about once per entry, and a full pass now and
  then. :func:`collector_paused` turns automatic collection off while a task decodes
  and collects the young generations itself at each Arrow batch it hands to Spark -- a
  pass over the few objects alive then, so cyclic garbage (there is almost none: ~400
  objects per million rows) cannot pile up over a long task.

Reference counting frees everything else as usual (frozen objects included); only cycle
detection is deferred, or skipped for the objects that lived through the first call.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from typing import TypeVar

T = TypeVar("T")

_heap = {"settled": False}


def settle_worker_heap() -> None:
    """Once per process, at the end of the source's first call in it: a full collection,
    then ``gc.freeze()`` of what survives (see the module doc)."""
    if not _heap["settled"]:
        _heap["settled"] = True
        gc.collect()
        gc.freeze()


def collector_paused(items: Iterator[T]) -> Iterator[T]:
    """``items``, produced with automatic collection off; the young generations are
    collected at each item (an Arrow batch), and the collector's previous state is
    restored (and the heap settled, :func:`settle_worker_heap`) when the iterator ends,
    fails or is closed."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        for item in items:
            gc.collect(1)
            yield item
    finally:
        if was_enabled:
            gc.enable()
        settle_worker_heap()
