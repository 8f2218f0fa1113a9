"""Parsers of one option value of the ``raftlog`` data source: integers, booleans, log
offsets, durations, timestamps, the read consistency (pure functions).

Why a module of their own: each raises :class:`RaftlogSourceError` with the same wording
(``option NAME='VALUE' is invalid: RULE``), whichever option table uses it -- the source's
own options (``options.py``) and the Kafka-compatible ones (``kafka_options.py``).
"""

from __future__ import annotations

import datetime as dt
import re
from typing import Final

from raftlog_spark.errors import RaftlogSourceError

_DURATION = re.compile(r"(\d+(?:\.\d+)?)\s*(ms|s|sec|m|min|h)?")
_DURATION_UNITS: Final = {
    None: 1.0,
    "ms": 0.001,
    "s": 1.0,
    "sec": 1.0,
    "m": 60.0,
    "min": 60.0,
    "h": 3600.0,
}


def option_error(name: str, value: str, rule: str) -> RaftlogSourceError:
    """The error of an invalid option value, naming the option, the value and the rule."""
    return RaftlogSourceError(f"raftlog source: option {name}={value!r} is invalid: {rule}")


def parse_int(name: str, value: str, minimum: int) -> int:
    """An integer of at least ``minimum`` (counts and sizes: 0 or 1 at least)."""
    try:
        number = int(value.strip())
    except ValueError:
        raise option_error(name, value, "must be an integer") from None
    if number < minimum:
        raise option_error(name, value, f"must be >= {minimum}")
    return number


def parse_bool(name: str, value: str) -> bool:
    """``true``/``1``/``yes`` or ``false``/``0``/``no``, in any case."""
    lowered = value.strip().lower()
    if lowered in ("true", "1", "yes"):
        return True
    if lowered in ("false", "0", "no"):
        return False
    raise option_error(name, value, "must be true or false")


OFFSET_FORMS: Final = {
    "startingOffsets": 'earliest, latest (streams only), an index N >= 0, or {"index": N}',
    "endingOffsets": 'latest, an index N >= 0, or {"index": N}',
}
"""Every valid form of the offset options, for their error messages."""


def parse_offset(name: str, value: str) -> int:
    """An index, given plainly or as the source's offset ``{"index": N}``."""
    text = value.strip()
    match = re.fullmatch(r'\{\s*"index"\s*:\s*(\d+)\s*\}', text)
    number = match.group(1) if match else text
    if not re.fullmatch(r"\d+", number):
        raise option_error(name, value, f"must be {OFFSET_FORMS.get(name, 'an index N >= 0')}")
    return int(number)


def parse_duration(name: str, value: str) -> float:
    """Seconds from ``15m``, ``30s``, ``500ms``, ``1h`` or a plain number of seconds."""
    match = _DURATION.fullmatch(value.strip().lower())
    if match is None:
        raise option_error(name, value, "must be a duration like 30s, 15m or 1h")
    return float(match.group(1)) * _DURATION_UNITS[match.group(2)]


def parse_consistency(value: str) -> str:
    """``any`` or ``linearizable``; a source has written nothing in its own session, so
    ``read_your_writes`` would mean nothing more than ``any`` and is refused."""
    if value in ("any", "linearizable"):
        return value
    raise option_error("consistency", value, "any or linearizable")


def parse_timestamp_ms(name: str, value: str) -> int:
    """Milliseconds since the epoch, from an integer (ms) or an ISO-8601 time (naive = UTC)."""
    text = value.strip()
    if re.fullmatch(r"-?\d+", text):
        number = int(text)
        if number < 0:
            raise option_error(name, value, "must not be negative")
        return number
    try:
        when = dt.datetime.fromisoformat(text)
    except ValueError:
        raise option_error(
            name, value, "must be milliseconds since the epoch or an ISO-8601 time"
        ) from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.UTC)
    return int(when.timestamp() * 1000)
