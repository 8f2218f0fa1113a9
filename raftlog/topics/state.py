"""``TopicState``: one incarnation of a topic, and its one versioned codec (issue #26).

The state is written in two places -- the topic index's version rows (``index``, one per
admin change) and the topic part of a snapshot (``snapshot``) -- and both go through
:func:`encode_state` / :func:`decode_state`, so a new topic property needs no change here.

Layouts, all MessagePack:

* version 3 (written now): a map keyed by name -- every ``TopicProperties`` field under its
  own name, ``created_index``, ``low_water`` as ``[index, position]`` and ``v``. Unknown keys
  are ignored and missing properties read as unset, so adding a property is compatible
  both ways between peers that know the version.
* version 2 (before #26): ``[retention_ms, max_bytes, created_index, max_record_bytes,
  low-water index, low-water position]``;
* version 1 (before size retention): ``[retention_ms, max_record_bytes, created_index]``.

Versions 1 and 2 are still read: an index or a snapshot written by an older peer decodes to
the same state.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, Final

from raftlog.topics.records import RecordId, TopicProperties

STATE_VERSION: Final = 3
NO_LOW_WATER: Final = RecordId(0, 0)
PROPERTY_FIELDS: Final = tuple(f.name for f in fields(TopicProperties))
"""Every topic property, in declaration order: the codec follows the dataclass."""


@dataclass(frozen=True, slots=True)
class TopicState:
    """One incarnation of a topic: its properties, where it was created, and its low-water
    mark (records before it never come back, whatever later property changes say)."""

    properties: TopicProperties
    created_index: int
    low_water: RecordId = NO_LOW_WATER


class StateFormatError(ValueError):
    """Stored topic state this code cannot read (corrupt, or from a newer format)."""


def encode_state(state: TopicState) -> dict[str, Any]:
    """The version-3 map of ``state`` (MessagePack-ready)."""
    props = state.properties
    body: dict[str, Any] = {"v": STATE_VERSION}
    for name in PROPERTY_FIELDS:
        value = getattr(props, name)
        if value is not None:  # unset properties are absent: smaller, and read back as None
            body[name] = value
    body["created_index"] = state.created_index
    body["low_water"] = [state.low_water.index, state.low_water.position]
    return body


def decode_state(value: object) -> TopicState:
    """A state from any layout ever written (see the module docstring)."""
    if isinstance(value, dict):
        return _decode_map(value)
    if isinstance(value, list | tuple) and len(value) == 3:
        retention, max_record, created = value  # max_bytes was the per-record limit then
        return TopicState(TopicProperties(retention, None, max_record), _uint(created))
    if isinstance(value, list | tuple) and len(value) == 6:
        retention, max_bytes, created, max_record, low_index, low_position = value
        return TopicState(
            TopicProperties(retention, max_bytes, max_record),
            _uint(created),
            RecordId(_uint(low_index), _uint(low_position)),
        )
    raise StateFormatError(f"unreadable topic state: {type(value).__name__}")


def _decode_map(body: dict[Any, Any]) -> TopicState:
    version = body.get("v")
    if not isinstance(version, int) or version < 3:
        raise StateFormatError(f"unreadable topic state version: {version!r}")
    low = body.get("low_water", [0, 0])
    if not isinstance(low, list | tuple) or len(low) != 2:
        raise StateFormatError("unreadable topic state: low_water")
    props = TopicProperties(**{name: body.get(name) for name in PROPERTY_FIELDS})
    low_water = RecordId(_uint(low[0]), _uint(low[1]))
    return TopicState(props, _uint(body.get("created_index")), low_water)


def _uint(value: object) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise StateFormatError(f"unreadable topic state: {value!r} is not an index")
    return value
