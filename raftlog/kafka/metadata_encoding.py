"""A Metadata answer for every topic, encoded at the cost of its names.

Why: kio encodes in Python, field by field with type checks, ~10 µs per topic entry, and
building the entries with ``make`` cost as much again: 0.6-1.0 s of the peer's interpreter
for 50,000 topics, held against the consensus loop (they share the interpreter lock). The
answer is kept once encoded (``raftlog.kafka.admin``), but it must be encoded again whenever
a topic comes or goes and at every leader change -- exactly when a cluster can least afford
a second of starved heartbeats (four Metadata clients against 50,000 topics caused elections
in a row).

In an answer for every topic, all entries are the same but for the name: no error, one
partition led by the same broker with the same replicas. So kio encodes the answer's shell
(no topics) and one entry (empty name), and the entries are written as the entry's bytes
with each name's encoding in place of the empty one -- Metadata puts ``error_code`` first and
``name`` second in every version -- and the array put in the shell's place for it (the only
field after ``topics`` is ``cluster_authorized_operations``, plus the tagged fields of a
flexible version). Every splice is checked against kio's own encoding of a one-topic answer
before it is used; if the layout were ever different (a kio upgrade), kio encodes it all.
"""

from __future__ import annotations

import dataclasses
import io
from collections.abc import Callable, Sequence
from typing import Any, Final

from kio.serial.writers import (
    write_compact_array_length,
    write_compact_string,
    write_legacy_array_length,
    write_legacy_string,
)

from raftlog.kafka.protocol import EncodedPayload, encode_entity

__all__ = ["encode_every_topic"]

_AFTER_TOPICS: Final = {"cluster_authorized_operations": 4}
"""Fields a Metadata response may have after ``topics``, and their sizes (int32)."""
_ERROR_CODE_SIZE: Final = 2


def _written(write: Callable[[Any, Any], None], value: Any) -> bytes:
    out = io.BytesIO()
    write(out, value)
    return out.getvalue()


def _bytes_after_topics(cls: type) -> int | None:
    """How many bytes follow the topics array in an encoded ``cls`` (None: unknown)."""
    names = [f.name for f in dataclasses.fields(cls)]
    after = 0
    for name in names[names.index("topics") + 1 :]:
        size = _AFTER_TOPICS.get(name)
        if size is None:
            return None
        after += size
    return after + (1 if cls.__flexible__ else 0)  # type: ignore[attr-defined]


def encode_every_topic(shell: Any, entry: Any, names: Sequence[str]) -> EncodedPayload:
    """The answer ``shell`` (a kio MetadataResponse with no topics) listing one copy of
    ``entry`` (a MetadataResponseTopic named ``""``) per name in ``names``, encoded."""
    cls = type(shell)
    flexible = cls.__flexible__
    write_name = write_compact_string if flexible else write_legacy_string
    write_length: Callable[[Any, Any], None] = (
        write_compact_array_length if flexible else write_legacy_array_length
    )
    entry_bytes, shell_bytes = encode_entity(entry), encode_entity(shell)
    no_name, no_topics = _written(write_name, ""), _written(write_length, 0)
    head = entry_bytes[:_ERROR_CODE_SIZE]
    tail = entry_bytes[_ERROR_CODE_SIZE + len(no_name) :]
    after = _bytes_after_topics(cls)
    cut = -1 if after is None else len(shell_bytes) - after
    prefix, suffix = shell_bytes[: cut - len(no_topics)], shell_bytes[cut:]

    def spliced(listed: Sequence[str]) -> bytes:
        out = io.BytesIO()
        out.write(prefix)
        write_length(out, len(listed))
        for name in listed:
            out.write(head)
            write_name(out, name)
            out.write(tail)
        out.write(suffix)
        return out.getvalue()

    def whole(listed: Sequence[str]) -> Any:
        topics = tuple(dataclasses.replace(entry, name=name) for name in listed)
        return dataclasses.replace(shell, topics=topics)

    if (
        after is None
        or entry_bytes[_ERROR_CODE_SIZE : _ERROR_CODE_SIZE + len(no_name)] != no_name
        or shell_bytes[cut - len(no_topics) : cut] != no_topics
        or spliced(["probe", "ü"]) != encode_entity(whole(["probe", "ü"]))
    ):
        return EncodedPayload.of(whole(names))  # not the layout this module knows
    return EncodedPayload(cls.__header_schema__, spliced(names))
