"""``read``/``tail --format FMT``: kcat-style format strings for records and entries.

Why: a shell user wants the key and value side by side, or just the values, without jq --
kcat's ``-f '%k %v\\n'`` is what they know. Tokens:

=======  ===============================================================
``%i``   the id: ``INDEX:POSITION`` of a topic record, the log index of an entry
``%t``   the topic (empty for a raw entry)
``%k``   the key (empty when none)
``%v``   the value (a raw entry's data)
``%h``   the headers as ``name=value`` pairs separated by ``,``
``%T``   the append time, ISO 8601 UTC (empty for a raw entry)
``%S``   the value's size in bytes
``%%``   a ``%``;  ``\\n``, ``\\t`` and ``\\\\`` are a newline, a tab and a backslash
=======  ===============================================================

Each item prints as one line: a trailing ``\\n`` in the format is optional. Unknown tokens are
refused before anything is read (``FormatError``), not printed verbatim.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Mapping
from typing import Final

TOKENS: Final = frozenset("itkvhTS%")
_PIECE: Final = re.compile(r"%(.)|\\(.)", re.DOTALL)
_ESCAPES: Final = {"n": "\n", "t": "\t", "\\": "\\"}


class FormatError(argparse.ArgumentTypeError):
    """A format string with an unknown ``%`` token or escape (argparse prints the message
    as a usage error, exit 2)."""


def check_format(fmt: str) -> str:
    """``fmt`` if every token and escape is known, else ``FormatError`` naming the bad one."""
    for match in _PIECE.finditer(fmt):
        token, escape = match.group(1), match.group(2)
        if token is not None and token not in TOKENS:
            raise FormatError(f"--format: unknown token %{token} (known: %i %t %k %v %h %T %S %%)")
        if escape is not None and escape not in _ESCAPES:
            raise FormatError(f"--format: unknown escape \\{escape} (known: \\n \\t \\\\)")
    if fmt.endswith("%") or (fmt.endswith("\\") and not fmt.endswith("\\\\")):
        raise FormatError("--format: the format ends in the middle of a token")
    return fmt


def render(fmt: str, fields: Mapping[str, str]) -> str:
    """``fmt`` with its tokens replaced by ``fields`` (keys: the token letters), without a
    trailing newline (the caller prints one line per item)."""

    def piece(match: re.Match[str]) -> str:
        token, escape = match.group(1), match.group(2)
        if token is not None:
            return "%" if token == "%" else fields.get(token, "")
        return _ESCAPES[escape]

    return _PIECE.sub(piece, fmt).removesuffix("\n")
