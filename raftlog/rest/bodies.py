"""Request bodies and message payloads: bounded reading, JSON, payload encodings, ids.

Why bounded by hand: a body is read in chunks and refused with 413 as soon as it passes
``max_body_bytes`` (or at once when ``Content-Length`` says so), so a huge upload never
sits in the peer's memory; a body trickled slower than ``[http] body_timeout_ms`` is
refused with 408; the bodies of all requests together are held to ``[rest]
body_memory_bytes`` (``raftlog.rest.body_memory``: a large one waits, unread, for room);
malformed JSON, JSON nested deeper than ``MAX_JSON_DEPTH``, strings that
are not Unicode (a lone surrogate such as ``"\\ud800"``), wrong types and bad base64 are the
caller's 400s with a message that says which field, never a 500.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import json
import re
from collections.abc import Mapping
from typing import Any, Final

from aiohttp import web

from raftlog.entry import REQUEST_ID_SIZE
from raftlog.rest.body_memory import BODY_MEMORY, SMALL_BODY_BYTES
from raftlog.topics.records import MAX_POSITION, MAX_UINT, RecordId
from raftlog.topics.records_kv import NO_RECORD, Expected
from raftlog.web.app_keys import BODY_TIMEOUT, DEFAULT_BODY_TIMEOUT
from raftlog.web.errors import RestError

ENCODINGS: Final = ("base64", "text", "json")
"""How message payloads are written in JSON: base64 strings (any bytes, the default), UTF-8
text strings, or any JSON value (stored as its compact UTF-8 JSON)."""
READ_CHUNK: Final = 64 * 1024
MAX_JSON_DEPTH: Final = 64
"""Deepest nesting of arrays and objects a request body may have (a message with
``encoding: json`` included)."""
_SURROGATE: Final = re.compile("[\ud800-\udfff]")
REQUEST_ID_HEADER: Final = "Raftlog-Request-Id"
"""A client's own 12-byte request id (24 hex digits: 4 bytes of seconds since the epoch, then
8 unique bytes, as raftlog.ids makes them): a write retried with the same id is applied at
most once (the cluster's request-id deduplication, for ``request_id_ttl``)."""


def _too_large(limit: int) -> RestError:
    return RestError(
        413, "BodyTooLarge", f"request bodies are limited to {limit} bytes ([rest] max_body_bytes)"
    )


async def read_body(request: web.Request, limit: int) -> bytes:
    """The request body, at most ``limit`` bytes (413 ``BodyTooLarge`` beyond), held in the
    body memory when the application has one (503 ``Busy`` when it has no room in time)."""
    declared = request.content_length
    if declared is not None and declared > limit:
        raise _too_large(limit)
    timeout = request.config_dict.get(BODY_TIMEOUT, DEFAULT_BODY_TIMEOUT)
    memory = request.config_dict.get(BODY_MEMORY)
    if memory is not None and declared is not None:
        await memory.hold(request, declared, timeout)  # unread until it fits
    chunks: list[bytes] = []
    size = 0
    waiting = False
    try:
        async with asyncio.timeout(timeout):  # from the first byte read: waits are ours
            while chunk := await request.content.read(READ_CHUNK):
                size += len(chunk)
                if size > limit:
                    raise _too_large(limit)
                chunks.append(chunk)
                if memory is not None and declared is None and size - len(chunk) <= \
                        SMALL_BODY_BYTES < size:  # chunked and no longer small: the most
                    waiting = True            # it may reach, until it is read
                    await memory.hold(request, limit, timeout)
                    waiting = False
        body = b"".join(chunks)
    except TimeoutError:
        if waiting and memory is not None:
            raise memory.busy() from None
        raise RestError(408, "RequestTimeout", f"the request body did not arrive within "
                        f"{timeout:g} s ([http] body_timeout_ms)") from None
    finally:  # an error's traceback keeps this frame, and with it the chunks, until the
        chunks.clear()  # cyclic collector runs: measured ~1 GB under a flood of 408s
    if memory is not None and declared is None:
        memory.shrink(request, size)
    return body


def check_json_value(value: object) -> None:
    """400 unless ``value`` nests at most ``MAX_JSON_DEPTH`` deep and its strings (keys
    included) are Unicode text, i.e. encodable as UTF-8 (no lone surrogates)."""
    stack: list[tuple[object, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, str):
            if _SURROGATE.search(item):
                raise RestError(400, "MalformedJson", "the body holds a string that is not "
                                "Unicode text (a lone UTF-16 surrogate such as \\ud800)")
            continue
        if not isinstance(item, dict | list):
            continue
        if depth >= MAX_JSON_DEPTH:
            raise RestError(400, "MalformedJson",
                            f"the body nests deeper than {MAX_JSON_DEPTH} arrays/objects")
        children = [*item.keys(), *item.values()] if isinstance(item, dict) else item
        stack.extend((child, depth + 1) for child in children)


async def read_json_object(request: web.Request, limit: int, *, optional: bool = False) -> dict[
    str, Any
]:
    """The body as a JSON object; an empty body is ``{}`` when ``optional``."""
    raw = await read_body(request, limit)
    if not raw.strip():
        if optional:
            return {}
        raise RestError(400, "BadRequest", "this request needs a JSON object body")
    try:
        value = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise RestError(400, "MalformedJson", f"the body is not valid JSON: {exc}") from None
    except RecursionError:
        raise RestError(400, "MalformedJson",
                        f"the body nests deeper than {MAX_JSON_DEPTH} arrays/objects") from None
    if not isinstance(value, dict):
        raise RestError(400, "BadRequest", "the body must be a JSON object")
    check_json_value(value)
    return value


def request_id_of(request: web.Request) -> bytes | None:
    """The ``Raftlog-Request-Id`` header as 12 bytes (None without it; 400 if malformed)."""
    raw = request.headers.get(REQUEST_ID_HEADER)
    if raw is None:
        return None
    try:
        rid = bytes.fromhex(raw.strip())
    except ValueError:
        rid = b""
    if len(rid) != REQUEST_ID_SIZE or rid == bytes(REQUEST_ID_SIZE):
        raise RestError(400, "BadRequest", f"{REQUEST_ID_HEADER} must be {2 * REQUEST_ID_SIZE} "
                        "hex digits: 4 bytes of seconds since the epoch, 8 unique bytes")
    return rid


def _dumps(value: object) -> str:
    return json.dumps(value, ensure_ascii=False) + "\n"


def json_reply(
    value: object, *, status: int = 200, headers: Mapping[str, str] | None = None
) -> web.Response:
    """A JSON answer ending in a newline (so ``curl`` output ends its line)."""
    return web.json_response(value, status=status, headers=headers, dumps=_dumps)


def check_fields(body: Mapping[str, Any], known: frozenset[str]) -> None:
    """400 on a field this endpoint does not know (a typo must not be ignored silently)."""
    unknown = set(body) - known
    if unknown:
        raise RestError(
            400, "BadRequest", f"unknown field(s) {sorted(unknown)}; known: {sorted(known)}"
        )


def encoding_of(body: Mapping[str, Any]) -> str:
    """The body's ``encoding`` (default base64)."""
    encoding = body.get("encoding", "base64")
    if encoding not in ENCODINGS:
        raise RestError(400, "BadRequest", f"encoding must be one of {', '.join(ENCODINGS)}")
    return str(encoding)


def decode_messages(body: Mapping[str, Any], *, required: bool = True) -> list[bytes]:
    """The payloads of ``body["messages"]`` in the body's encoding."""
    encoding = encoding_of(body)
    messages = body.get("messages")
    if messages is None and not required:
        return []
    if not isinstance(messages, list) or not messages:
        raise RestError(400, "BadRequest", "messages must be a non-empty array")
    out: list[bytes] = []
    for n, item in enumerate(messages):
        if encoding == "json":
            out.append(json.dumps(item, separators=(",", ":"), ensure_ascii=False).encode())
            continue
        if not isinstance(item, str):
            raise RestError(400, "BadRequest", f"messages[{n}] must be a string ({encoding})")
        if encoding == "text":
            out.append(item.encode("utf-8"))
            continue
        try:
            out.append(base64.b64decode(item, validate=True))
        except (binascii.Error, ValueError):
            raise RestError(400, "BadRequest", f"messages[{n}] is not valid base64") from None
    return out


def encode_payload(payload: bytes, encoding: str) -> dict[str, Any]:
    """A payload for a poll answer: ``payload`` in the asked encoding, or ``payloadBase64``
    when the bytes are not valid text / JSON (stored data is never refused)."""
    if encoding != "base64":
        try:
            text = payload.decode("utf-8")
            return {"payload": text if encoding == "text" else json.loads(text)}
        except (UnicodeDecodeError, json.JSONDecodeError):
            pass
    return {("payload" if encoding == "base64" else "payloadBase64"):
            base64.b64encode(payload).decode("ascii")}


def format_id(record_id: RecordId) -> str:
    """A message id as REST shows it: ``"INDEX-POSITION"`` (sorts like the log in numeric
    order; the position is the record's place in its entry)."""
    return f"{record_id.index}-{record_id.position}"


def parse_id(text: str, what: str) -> RecordId:
    """A message id written by :func:`format_id` (400 otherwise)."""
    index, dash, position = text.partition("-")
    if dash and index.isdigit() and position.isdigit():
        rid = RecordId(int(index), int(position))
        if rid.index <= MAX_UINT and rid.position <= MAX_POSITION:
            return rid
    raise RestError(400, "BadRequest", f"{what} {text[:40]!r} is not a message id (INDEX-POSITION)")


def expected_id(body: Mapping[str, Any], name: str) -> Expected:
    """An optional expected last id (issue #29): a message id, or ``"none"`` (``NO_RECORD``:
    "no message"); absent or null: None, no condition."""
    value = body.get(name)
    if value is None:
        return None
    if value == "none":
        return NO_RECORD
    if not isinstance(value, str):
        raise RestError(400, "BadRequest", f"{name} must be a message id or \"none\"")
    return parse_id(value, name)


def optional_int(body: Mapping[str, Any], name: str, low: int, high: int) -> int | None:
    """An optional integer field within ``low .. high``."""
    value = body.get(name)
    if value is None:
        return None
    if type(value) is not int or not low <= value <= high:
        raise RestError(400, "BadRequest", f"{name} must be an integer in {low} .. {high}")
    return value


def optional_bool(body: Mapping[str, Any], name: str, default: bool) -> bool:
    """An optional boolean field."""
    value = body.get(name, default)
    if type(value) is not bool:
        raise RestError(400, "BadRequest", f"{name} must be true or false")
    return value
