"""Topic properties (``TopicProperties``): one dataclass field per property, which every
place that carries properties follows -- the admin command codec (``check_property``), the
``TD`` answer, the stored state and snapshot (``raftlog.topics.state``), the REST body and its
OpenAPI schema, and the clients' ``create_topic(properties=...)``. Re-exported by
``raftlog.topics.records``, the entry format that carries them. A property's kind is its
field's ``metadata``: ``uint`` (a limit in 1 .. 2^53-1) or ``text`` (optionally with
``choices``: the only values accepted)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any, Final, Literal, TypeAlias

from raftlog.errors import RecordFormatError

MAX_UINT: Final = (1 << 53) - 1
AdminOp: TypeAlias = Literal["create", "update", "delete"]
DEFAULT_TOMBSTONE_RETENTION_MS: Final = 24 * 60 * 60 * 1000
PropertyValue: TypeAlias = int | str | None
"""A topic property's value: a limit (uint) or a text; None: unset."""
MAX_PROPERTY_TEXT: Final = 1024
"""Largest text property, in UTF-8 bytes (it is stored in every version row and snapshot)."""
_UINT: Final = {"kind": "uint"}
_TEXT: Final = {"kind": "text"}
CLEANUP_POLICIES: Final = ("delete", "compact", "compact,delete")
_POLICY: Final = {"kind": "text", "choices": CLEANUP_POLICIES}


@dataclass(frozen=True, slots=True)
class TopicProperties:
    """A topic's retention and limits; every limit is optional (None: none)."""

    retention_ms: int | None = field(default=None, metadata=_UINT)
    """Records expire this long after their append time (None: never)."""
    max_bytes: int | None = field(default=None, metadata=_UINT)
    """Size retention (Kafka's ``retention.bytes``): the newest records whose sizes add up
    to at most this are kept, the older ones expire (None: no size limit)."""
    max_record_bytes: int | None = field(default=None, metadata=_UINT)
    """Largest ``Record.size`` accepted (None: only the log's entry size limit)."""
    description: str | None = field(default=None, metadata=_TEXT)
    """What the topic is for, for people (at most ``MAX_PROPERTY_TEXT`` bytes of UTF-8); no
    rule reads it."""
    cleanup_policy: str | None = field(default=None, metadata=_POLICY)
    """``delete`` (None: the default; retention removes old records), ``compact`` (only the
    latest record per key is kept; ``raftlog.topics.compacted``) or ``compact,delete``
    (compacted, and records older than ``retention_ms`` expire as well)."""
    tombstone_retention_ms: int | None = field(default=None, metadata=_UINT)
    """How long a compacted topic keeps a tombstone on the log clock, so readers see the
    deletion (None: ``DEFAULT_TOMBSTONE_RETENTION_MS``, a day, as Kafka's
    ``delete.retention.ms``)."""

    @property
    def compacted(self) -> bool:
        """Does this topic keep only the latest record per key (``cleanup_policy``)?"""
        return self.cleanup_policy is not None and self.cleanup_policy.startswith("compact")

    def updated(self, changes: Mapping[str, PropertyValue]) -> TopicProperties:
        """These properties with ``changes`` applied (a name absent from it keeps its value)."""
        known: dict[str, Any] = {n: v for n, v in changes.items() if n in PROPERTY_NAMES}
        return replace(self, **known)  # values were checked by ``check_properties``

    def as_dict(self) -> dict[str, PropertyValue]:
        """Every property by name (unset ones as None), in declaration order."""
        return {name: getattr(self, name) for name in PROPERTY_NAMES}


PROPERTY_KINDS: Final[Mapping[str, str]] = {
    f.name: f.metadata["kind"] for f in fields(TopicProperties)
}
"""Every topic property and its kind (``uint``: a limit in 1 .. 2^53-1; ``text``): what the
admin command codec, the wire, the REST API and the stored state all follow, so a new
property is one field above."""
PROPERTY_NAMES: Final = tuple(PROPERTY_KINDS)
PROPERTY_CHOICES: Final[Mapping[str, tuple[str, ...]]] = {
    f.name: f.metadata["choices"] for f in fields(TopicProperties) if "choices" in f.metadata
}
"""The allowed values of a text property that has a fixed set (``cleanup_policy``)."""


def check_property(name: object, value: object) -> PropertyValue:
    """One property: a known name, and a value of its kind or None."""
    kind = PROPERTY_KINDS.get(name) if isinstance(name, str) else None
    if kind is None:
        raise RecordFormatError(
            f"unknown topic property {name!r} (known: {', '.join(PROPERTY_NAMES)})",
            "InvalidProperty",
        )
    if value is None:
        return None
    if kind == "text":
        choices = PROPERTY_CHOICES.get(str(name), ())
        if choices and value not in choices:
            raise RecordFormatError(
                f"topic property {name} must be null or one of {', '.join(choices)}, "
                f"got {value!r:.80}",
                "InvalidProperty",
            )
        if not isinstance(value, str) or len(value.encode()) > MAX_PROPERTY_TEXT:
            raise RecordFormatError(
                f"topic property {name} must be null or a text of at most "
                f"{MAX_PROPERTY_TEXT} bytes, got {value!r:.80}",
                "InvalidProperty",
            )
        return value
    if type(value) is not int or not 1 <= value <= MAX_UINT:
        raise RecordFormatError(
            f"topic property {name} must be null or an integer in 1 .. 2^53-1, got {value!r}",
            "InvalidProperty",
        )
    return value


def check_properties(props: object, op: AdminOp) -> dict[str, PropertyValue]:
    """Known property names only, each of its kind or None; ``delete`` takes none."""
    if not isinstance(props, Mapping):
        raise RecordFormatError("topic properties must be a map", "InvalidProperty")
    out = {name: check_property(name, value) for name, value in props.items()}
    if op == "delete" and out:
        raise RecordFormatError("delete takes no properties", "InvalidProperty")
    return out
