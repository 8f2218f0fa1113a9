"""Every bad HTTP input gets a 4xx, never a 500 (issue #25 finding 10), and the served
OpenAPI document is valid and true: openapi-spec-validator checks it, and schemathesis
sends every endpoint of a real peer generated requests, valid and invalid, asserting that
none is answered 5xx and that every answer matches the documented schema.

Bounded in time: ``EXAMPLES`` cases per operation and mode (about 30 s on a quiet machine).
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis.errors import Unsatisfiable
from openapi_spec_validator import validate
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.openapi.checks import JsonSchemaError

from integration.cluster import module_cluster
from integration.rest.helpers import RestCluster, call, started

EXAMPLES = 25
"""Generated requests per operation and generation mode."""
TOPIC = "/v1/namespaces/default/topics"


cluster = module_cluster(started, "rest-fuzz")


def test_nesting_and_lone_surrogates_are_400_not_500(cluster: RestCluster) -> None:
    base = cluster.http_url(cluster.follower())
    assert call(base, "PUT", f"{TOPIC}/fz").status == 200
    # 32,000 deep fits this cluster's 64 KiB body limit and is far past Python's recursion
    # limit (what a million did to the 4 MiB default: a 500 RecursionError)
    deep = b'{"messages": ' + b"[" * 32_000 + b"]" * 32_000 + b"}"
    for raw in (
        deep,
        b'{"messages": ' + b"[" * 100 + b"1" + b"]" * 100 + b', "encoding": "json"}',
        b'{"messages": ["\\ud800"], "encoding": "text"}',
        b'{"messages": [{"\\udfff": 1}], "encoding": "json"}',
    ):
        answer = call(base, "POST", f"{TOPIC}/fz/publish", raw=raw,
                      headers={"Content-Type": "application/json"})
        assert answer.status == 400, (raw[:60], answer.status, answer.raw[:200])
        assert answer.body["error"] == "MalformedJson"
    polled = call(base, "POST", f"{TOPIC}/fz/poll", {"encoding": "text"})
    assert polled.status == 200 and polled.body == []  # nothing was stored
    ok = call(base, "POST", f"{TOPIC}/fz/publish", {"messages": ["é ✓"], "encoding": "text"})
    assert ok.status == 200


def test_the_served_openapi_document_is_valid_and_every_endpoint_keeps_to_it(
    cluster: RestCluster, tmp_path: Path
) -> None:
    base = cluster.http_url(cluster.follower())
    document = call(base, "GET", "/v1/openapi.json").body
    validate(document)  # raises on an invalid document (e.g. "required": [])
    assert call(base, "PUT", f"{TOPIC}/orders").status == 200
    schema = schemathesis.openapi.from_dict(document)
    failures: list[str] = []
    calls = 0
    started_at = time.monotonic()
    for result in schema.get_all_operations():
        operation = result.ok()
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
            strategy = operation.as_strategy(generation_mode=mode)

            @settings(max_examples=EXAMPLES, deadline=None, database=None,
                      phases=[Phase.generate], suppress_health_check=list(HealthCheck))
            @given(case=strategy)
            def exercise(case: schemathesis.Case) -> None:
                nonlocal calls
                calls += 1
                response = case.call(base_url=base, timeout=15)
                label = f"{case.method} {case.formatted_path} -> {response.status_code}"
                if response.status_code >= 500:
                    failures.append(f"{label}: {response.text[:200]}")
                    return
                try:
                    case.validate_response(response, checks=[not_a_server_error])
                    json.loads(response.content or b"null")
                    case.operation.validate_response(response)
                except (AssertionError, ValueError, JsonSchemaError) as exc:
                    failures.append(f"{label}: does not match the schema: {str(exc)[:300]}")

            try:
                exercise()
            except Unsatisfiable:
                if mode is GenerationMode.POSITIVE:
                    raise  # a negative case is impossible where nothing can be wrong
    assert not failures, "\n".join(failures[:20])
    assert calls >= 10 * EXAMPLES  # every operation was exercised, not skipped
    assert time.monotonic() - started_at < 120
