"""Set-up checks and error shaping for the Spark source.

* Workers must run a Python that has ``raftlog_spark``: with a virtualenv that is not
  activated, Spark starts workers with the system ``python3`` and the user sees
  ``DATA_SOURCE_NOT_FOUND`` or ``ModuleNotFoundError``. :func:`check_driver_python` (run by
  :func:`raftlog_spark.register`, in the driver) and :func:`check_worker_python` (run at
  ``load()``, in a worker) say "set PYSPARK_PYTHON to ..." instead.
* Errors start with raftlog's one-line message: PySpark puts a worker's whole traceback
  into the error, before the line that matters; for the source's own errors
  (:class:`RaftlogSourceError`, raftlog's ``TopicError``) :func:`one_line_errors` asks the
  worker for the message only (``SPARK_HIDE_TRACEBACK``, read by PySpark's worker when it
  reports the error). The variable stays set in that worker process, so a later error of
  other Python code in the same (reused) worker is reported without traceback too.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from typing import Any, TypeVar, cast

from raftlog.topics.records import TopicError
from raftlog_spark.errors import RaftlogSourceError

F = TypeVar("F", bound=Callable[..., Any])
T = TypeVar("T")


def one_line_errors(method: F) -> F:
    """Report the source's own errors as their message alone (see the module doc)."""

    @functools.wraps(method)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return method(*args, **kwargs)
        except (RaftlogSourceError, TopicError):
            os.environ["SPARK_HIDE_TRACEBACK"] = "1"
            raise

    return cast(F, wrapper)


def one_line_rows(rows: Iterator[T]) -> Iterator[T]:
    """:func:`one_line_errors` for a task's rows: the source's errors surface while Spark
    iterates (a cluster gone mid-read), not when ``read`` returns its generator."""
    try:
        yield from rows
    except (RaftlogSourceError, TopicError):
        os.environ["SPARK_HIDE_TRACEBACK"] = "1"
        raise


def _python_has_source(python: str) -> bool:
    path = shutil.which(python) or python
    if os.path.realpath(path) == os.path.realpath(sys.executable):
        return True
    try:
        done = subprocess.run(
            [path, "-c", "import raftlog_spark"], capture_output=True, timeout=60, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return False
    return done.returncode == 0


def worker_python(conf: Any = None) -> str:
    """The interpreter Spark starts Python workers with (Spark's own precedence)."""
    configured = None
    if conf is not None:
        configured = conf.get("spark.pyspark.python", None)
    return configured or os.environ.get("PYSPARK_PYTHON") or "python3"


def check_driver_python(spark: Any) -> None:
    """Fail now, with the fix, when the workers' Python cannot import the source."""
    python = worker_python(spark.sparkContext.getConf())
    if not _python_has_source(python):
        raise RaftlogSourceError(
            f"raftlog source: Spark runs Python workers with {python!r}, which cannot import "
            f"raftlog_spark; set PYSPARK_PYTHON to {sys.executable} (the Python that has "
            "raftlog[spark]) before the SparkSession starts, or spark.pyspark.python"
        )


def check_worker_python() -> None:
    """In a worker: the same check for the executors' Python (one probe per worker)."""
    python = os.environ.get("PYSPARK_PYTHON")
    if python and not _python_has_source(python):
        raise RaftlogSourceError(
            f"raftlog source: PYSPARK_PYTHON is {python!r}, which cannot import raftlog_spark "
            f"(the driver's worker runs {sys.executable}); set PYSPARK_PYTHON to a Python "
            "that has raftlog[spark]"
        )
