"""Every ``sh`` example of docs/rest.md, run with ``curl`` against a real cluster configured
like ``make run``'s, its output compared with the ``json`` block that follows it (issue #18:
"docs/rest.md with curl examples that a test runs").

The examples name ``make run``'s ports (8049, 8149, 8249); they are replaced with this
cluster's. Outputs are compared as JSON values: a message id matches any id with the same
position, and indexes and times (``createdIndex``, ``timestamp``, ...) match any integer;
an "index N" inside a message matches any index; everything else (payloads, errors, status
codes, properties) must be equal. A documented id
that a later example quotes (``"startFrom": "2-1"``) is rewritten to the id this cluster gave
at that place: the leader's time checkpoints (issue #24) can shift log indexes.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from integration.cluster import PeerCluster, wait_for

from .helpers import call

pytestmark = pytest.mark.timeout(120)
DOC = Path(__file__).resolve().parents[3] / "docs" / "rest.md"
BLOCK = re.compile(r"```(\w+)\n(.*?)```", re.S)
ID = re.compile(r"^(\d+)-(\d+)$")
INDEX_IN_TEXT = re.compile(r"\bindex \d+")
VARYING = frozenset({"timestamp", "createdIndex", "commitIndex", "appliedIndex",
                     "lastAppendTime", "index"})
MAKE_RUN_PORTS = ("8049", "8149", "8249")


def examples() -> list[tuple[str, str | None]]:
    """(command, expected output or None) for each sh block, in document order."""
    blocks = [(m.group(1), m.group(2)) for m in BLOCK.finditer(DOC.read_text())]
    out: list[tuple[str, str | None]] = []
    for n, (lang, text) in enumerate(blocks):
        if lang == "sh":
            following = blocks[n + 1] if n + 1 < len(blocks) else None
            out.append((text, following[1] if following and following[0] == "json" else None))
    return out


def json_values(text: str) -> list[Any]:
    """The JSON values in ``text``, one after another (a body, then a status code)."""
    decoder = json.JSONDecoder()
    values, pos = [], 0
    while (pos := len(text) - len(text[pos:].lstrip())) < len(text):
        value, pos = decoder.raw_decode(text, pos)
        values.append(value)
    return values


def matches(expected: Any, actual: Any, key: str | None = None,
            ids: dict[str, str] | None = None) -> bool:
    """``actual`` is what ``expected`` documents; ``ids`` learns documented id -> actual id."""
    ids = {} if ids is None else ids
    if key in VARYING and type(expected) is int:
        return type(actual) is int
    if isinstance(expected, str) and (m := ID.match(expected)):
        found = isinstance(actual, str) and (n := ID.match(actual)) is not None and (
            n.group(2) == m.group(2))
        if found:
            ids[expected] = actual
        return found
    if isinstance(expected, dict):
        return isinstance(actual, dict) and expected.keys() == actual.keys() and all(
            matches(v, actual[k], k, ids) for k, v in expected.items())
    if isinstance(expected, list):
        return isinstance(actual, list) and len(expected) == len(actual) and all(
            matches(e, a, None, ids) for e, a in zip(expected, actual, strict=True))
    if isinstance(expected, str) and isinstance(actual, str):
        return INDEX_IN_TEXT.sub("index N", expected) == INDEX_IN_TEXT.sub("index N", actual)
    return bool(expected == actual and type(expected) is type(actual))


def with_actual_ids(script: str, ids: dict[str, str]) -> str:
    """``script`` with every quoted documented id replaced by the one this cluster gave."""
    for documented, actual in ids.items():
        script = script.replace(f'"{documented}"', f'"{actual}"')
    return script


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PeerCluster]:
    c = PeerCluster(tmp_path_factory.mktemp("rest-docs"), ident="raftlog-local", http=True)
    try:
        c.start()
        c.wait_stable_leader()
        for peer in c.peers.values():
            assert peer.http_url is not None
            url = peer.http_url
            wait_for(f"REST of {peer.id}",
                     lambda u=url: call(u, "GET", "/v1/namespaces").status == 200)
        yield c
    finally:
        c.stop()


def test_the_document_has_the_examples_the_issue_asks_for() -> None:
    commands = "\n".join(cmd for cmd, _ in examples())
    for needed in ("-X PUT", "/publish", "/poll", '"startFrom": 17', "/store", "/rollback",
                   '"transaction": "checkout-42"', "-X DELETE", "/properties"):
        assert needed in commands, needed


@pytest.mark.skipif(shutil.which("curl") is None, reason="curl is not installed")
def test_every_curl_example_gives_the_documented_output(cluster: PeerCluster) -> None:
    ports = [p.http_url.rsplit(":", 1)[1] for p in cluster.peers.values() if p.http_url]
    ids: dict[str, str] = {}
    for n, (command, expected) in enumerate(examples(), 1):
        script = with_actual_ids(command, ids)
        for doc_port, port in zip(MAKE_RUN_PORTS, ports, strict=True):
            script = script.replace(f"127.0.0.1:{doc_port}", f"127.0.0.1:{port}")
        done = subprocess.run(["bash", "-eo", "pipefail", "-c", script], capture_output=True,
                              text=True, timeout=30, check=False)
        assert done.returncode == 0, (n, command, done.stderr)
        if expected is None:
            continue
        actual = json_values(done.stdout)
        wanted = json_values(expected)
        assert matches(wanted, actual, None, ids), (
            f"example {n}:\n{command}\nwanted {wanted}\ngot {actual}")
