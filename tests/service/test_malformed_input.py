"""Malformed input of every kind gets an RFC 9457 problem with a stable type, and never a 500."""

from __future__ import annotations

import asyncio
import json
import random
import socket
from collections.abc import MutableMapping
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest
from fastapi.testclient import TestClient

from api.app import create_app
from kernelproof_core.settings import Settings
from tests.service.candidates import GOOD
from tests.service.conftest import TINY_CAMPAIGN

PROBLEM = "application/problem+json"
VALID: dict[str, Any] = {"task": "rms_norm", "source": GOOD, "campaign": TINY_CAMPAIGN}
JSON = {"Content-Type": "application/json"}


def with_(**changes: Any) -> bytes:
    body = {**VALID, **changes}
    return json.dumps({k: v for k, v in body.items() if v is not ...}).encode()


# (id, method, path, content, extra headers, status, problem slug)
CASES: list[tuple[str, str, str, bytes | None, dict[str, str], int, str]] = [
    ("invalid-json", "POST", "/v1/submissions", b'{"task": ', JSON, 400, "malformed-body"),
    ("not-utf8", "POST", "/v1/submissions", b'{"task": "\xff\xfe"}', JSON, 400, "malformed-body"),
    ("array-body", "POST", "/v1/submissions", b"[1, 2]", JSON, 422, "validation-error"),
    ("empty-body", "POST", "/v1/submissions", b"", JSON, 422, "validation-error"),
    ("missing-task", "POST", "/v1/submissions", with_(task=...), JSON, 422, "validation-error"),
    ("missing-source", "POST", "/v1/submissions", with_(source=...), JSON, 422, "validation-error"),
    ("empty-source", "POST", "/v1/submissions", with_(source=""), JSON, 422, "validation-error"),
    ("source-not-string", "POST", "/v1/submissions", with_(source=42), JSON, 422, "validation-error"),
    ("unknown-field", "POST", "/v1/submissions", with_(priority=1), JSON, 422, "validation-error"),
    ("unknown-task", "POST", "/v1/submissions", with_(task="matmul"), JSON, 422, "unknown-task"),
    ("unknown-dtype", "POST", "/v1/submissions", with_(dtypes=["int4"]), JSON, 422, "invalid-campaign"),
    ("empty-dtypes", "POST", "/v1/submissions", with_(dtypes=[]), JSON, 422, "validation-error"),
    ("unknown-preset", "POST", "/v1/submissions", with_(campaign="turbo"), JSON, 422, "invalid-campaign"),
    ("bad-preset-name", "POST", "/v1/submissions", with_(campaign="Quick!"), JSON, 422, "validation-error"),
    ("zero-samples", "POST", "/v1/submissions", with_(campaign={"samples": 0}), JSON, 422, "validation-error"),
    (
        "samples-over-limit",
        "POST",
        "/v1/submissions",
        with_(campaign={"samples": 10**30}),
        JSON,
        422,
        "campaign-out-of-limits",
    ),
    ("unknown-case", "POST", "/v1/submissions", with_(campaign={"case_ids": ["nope"]}), JSON, 422, "invalid-campaign"),
    ("stopping-no-target", "POST", "/v1/submissions", with_(campaign={"stopping": {}}), JSON, 422, "validation-error"),
    ("stopping-bad-order", "POST", "/v1/submissions",
     with_(campaign={"stopping": {"target_rse": 0.01, "min_samples": 50, "max_samples": 10}}), JSON, 422,
     "validation-error"),
    ("stopping-too-long", "POST", "/v1/submissions",
     with_(campaign={"stopping": {"target_rse": 0.01, "max_measure_s": 3600}}), JSON, 422, "campaign-out-of-limits"),
    ("stopping-too-tight", "POST", "/v1/submissions",
     with_(campaign={"stopping": {"target_rse": 1e-6}}), JSON, 422, "campaign-out-of-limits"),
    ("campaign-extra", "POST", "/v1/submissions", with_(campaign={"device": "cpu"}), JSON, 422, "validation-error"),
    ("huge-seed", "POST", "/v1/submissions", with_(campaign={"seed": 2**70}), JSON, 422, "validation-error"),
    ("bad-gpu-class", "POST", "/v1/submissions", with_(gpu_class="H 200"), JSON, 422, "validation-error"),
    ("metadata-list", "POST", "/v1/submissions", with_(metadata=[1]), JSON, 422, "validation-error"),
    (
        "too-many-tags",
        "POST",
        "/v1/submissions",
        with_(metadata={"tags": [str(i) for i in range(40)]}),
        JSON,
        422,
        "validation-error",
    ),
    (
        "metadata-nan",
        "POST",
        "/v1/submissions",
        json.dumps(VALID)[:-1].encode() + b', "metadata": {"x": NaN}}',
        JSON,
        422,
        "validation-error",
    ),
    (
        "metadata-deep",
        "POST",
        "/v1/submissions",
        with_(metadata={"a": json.loads("[" * 20 + "]" * 20)}),
        JSON,
        422,
        "validation-error",
    ),
    ("metadata-too-big", "POST", "/v1/submissions", with_(metadata={"x": "y" * 20_000}), JSON, 422, "validation-error"),
    ("nul-in-source", "POST", "/v1/submissions", with_(source="x = 1\u0000"), JSON, 422, "validation-error"),
    (
        "lone-surrogate",
        "POST",
        "/v1/submissions",
        with_(source="x").replace(b'"x"', b'"\\ud800"'),
        JSON,
        422,
        "validation-error",
    ),
    ("nul-in-metadata", "POST", "/v1/submissions", with_(metadata={"m": "\u0000"}), JSON, 422, "validation-error"),
    ("source-too-large", "POST", "/v1/submissions", with_(source="#" * 300_000), JSON, 413, "source-too-large"),
    ("body-too-large", "POST", "/v1/submissions", b" " * (5 * 1024 * 1024), JSON, 413, "payload-too-large"),
    ("deep-json", "POST", "/v1/submissions", b"[" * 100_000 + b"]" * 100_000, JSON, 400, "malformed-body"),
    ("text-plain", "POST", "/v1/submissions", with_(), {"Content-Type": "text/plain"}, 415, "unsupported-media-type"),
    ("no-content-type", "POST", "/v1/submissions", with_(), {}, 415, "unsupported-media-type"),
    (
        "idem-key-too-long",
        "POST",
        "/v1/submissions",
        with_(),
        {**JSON, "Idempotency-Key": "k" * 300},
        422,
        "validation-error",
    ),
    ("idem-key-space", "POST", "/v1/submissions", with_(), {**JSON, "Idempotency-Key": "a b"}, 422, "validation-error"),
    ("batch-empty", "POST", "/v1/submissions/batch", b'{"items": []}', JSON, 422, "validation-error"),
    ("batch-not-list", "POST", "/v1/submissions/batch", b'{"items": {"a": 1}}', JSON, 422, "validation-error"),
    (
        "batch-too-large",
        "POST",
        "/v1/submissions/batch",
        json.dumps({"items": [{}] * 65}).encode(),
        JSON,
        413,
        "batch-too-large",
    ),
    ("unknown-id", "GET", "/v1/submissions/" + "0" * 32, None, {}, 404, "not-found"),
    ("junk-id", "GET", "/v1/submissions/..%2F..%2Fetc", None, {}, 404, "not-found"),
    ("negative-wait", "GET", "/v1/submissions/" + "0" * 32 + "?wait=-1", None, {}, 422, "validation-error"),
    ("text-wait", "GET", "/v1/submissions/" + "0" * 32 + "?wait=soon", None, {}, 422, "validation-error"),
    ("report-unknown", "GET", "/v1/submissions/" + "0" * 32 + "/report", None, {}, 404, "not-found"),
    ("bad-cursor", "GET", "/v1/submissions?cursor=%%%", None, {}, 400, "bad-cursor"),
    ("forged-cursor", "GET", "/v1/submissions?cursor=bm90LWEtY3Vyc29y", None, {}, 400, "bad-cursor"),
    ("zero-limit", "GET", "/v1/submissions?limit=0", None, {}, 422, "validation-error"),
    ("bad-state", "GET", "/v1/submissions?state=done", None, {}, 422, "validation-error"),
    ("bad-date", "GET", "/v1/submissions?created_after=yesterday", None, {}, 422, "validation-error"),
    ("bad-client", "GET", "/v1/submissions?client=alice", None, {}, 422, "validation-error"),
    ("unknown-task-get", "GET", "/v1/tasks/matmul", None, {}, 404, "not-found"),
    ("leaderboard-limit", "GET", "/v1/leaderboard?limit=100000", None, {}, 422, "validation-error"),
    ("unknown-path", "GET", "/v1/nothing-here", None, {}, 404, "not-found"),
    ("wrong-method", "DELETE", "/v1/submissions", None, {}, 405, "method-not-allowed"),
]


@pytest.mark.parametrize(
    ("method", "path", "content", "headers", "status", "slug"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_malformed_request_gets_a_typed_problem(
    http: httpx.Client, method: str, path: str, content: bytes | None, headers: dict[str, str], status: int, slug: str
) -> None:
    response = http.request(method, path, content=content, headers=headers)
    assert response.status_code == status, response.text[:500]
    assert response.headers["content-type"] == PROBLEM
    problem = response.json()
    assert problem["type"] == f"urn:kernelproof:problem:{slug}"
    assert problem["status"] == status and problem["title"]


def test_chunked_body_over_the_cap_is_refused(http: httpx.Client) -> None:
    def chunks() -> Any:
        for _ in range(6):
            yield b" " * (1024 * 1024)

    response = http.post("/v1/submissions", content=chunks(), headers=JSON)
    assert response.status_code == 413 and response.json()["type"].endswith("payload-too-large")


def _mutate(rng: random.Random, value: Any, depth: int = 0) -> Any:
    junk: list[Any] = [
        None,
        True,
        -1,
        0,
        2**64,
        1e308,
        "",
        "x" * rng.randint(0, 300),
        [],
        {},
        [1, "a"],
        {"k": None},
        "rms_norm",
        "bfloat16",
        "quick",
        "\u202e\ud7ff",
        -0.0,
    ]
    if isinstance(value, dict) and depth < 3 and rng.random() < 0.8:
        out = dict(value)
        for _ in range(rng.randint(1, 3)):
            choice = rng.random()
            key = rng.choice([*out.keys(), "extra", "campaign", "metadata", "dtypes", "gpu_class"]) if out else "k"
            if choice < 0.3:
                out.pop(key, None)
            elif choice < 0.6:
                out[key] = _mutate(rng, out.get(key), depth + 1)
            else:
                out[key] = rng.choice(junk)
        return out
    if isinstance(value, list) and rng.random() < 0.5:
        return [_mutate(rng, v, depth + 1) for v in value] + [rng.choice(junk)]
    return rng.choice(junk)


def test_fuzzed_bodies_never_cause_a_server_error(http: httpx.Client) -> None:
    rng = random.Random(1234)
    base = {**VALID, "dtypes": ["bfloat16"], "metadata": {"generator": "g", "tags": ["t"]}, "gpu_class": "h200"}
    base["source"] = "x = 1\n"  # keep bodies small; validity of the candidate is not the point here
    statuses: set[int] = set()
    for i in range(250):
        body = _mutate(rng, base)
        response = http.post("/v1/submissions", json=body)
        statuses.add(response.status_code)
        assert response.status_code < 500, (i, body, response.text[:300])
        if response.status_code >= 400:
            assert response.headers["content-type"] == PROBLEM
            assert response.json()["type"].startswith("urn:kernelproof:problem:")
    assert 422 in statuses


def test_a_valid_stopping_rule_is_accepted_and_dropped_on_an_interpreter_service(http: httpx.Client) -> None:
    """Within the operator's limits a noise target is accepted; this service times on the interpreter, where
    adaptive stopping does not apply, so the stored campaign keeps the fixed count (no stopping rule in it)."""
    rule = {"target_rse": 0.01, "max_measure_s": 5}
    response = http.post("/v1/submissions", content=with_(campaign={**TINY_CAMPAIGN, "stopping": rule}),
                         headers=JSON)
    assert response.status_code == 202, response.text
    campaign = response.json()["campaign"]
    assert campaign.get("stopping") is None and campaign["samples"] == TINY_CAMPAIGN.get("samples", campaign["samples"])


def _raw_exchange(api_url: str, request: bytes) -> bytes:
    parts = urlsplit(api_url)
    reply = b""
    with socket.create_connection((parts.hostname or "127.0.0.1", parts.port or 80), timeout=10) as conn:
        conn.sendall(request)
        while chunk := conn.recv(65536):
            reply += chunk
    return reply


def test_framing_the_http_server_cannot_parse_is_refused_before_the_app(api_url: str) -> None:
    """API.md: a request uvicorn's parser cannot frame (here a Content-Length that is not a number) is answered 400
    by the server itself, in plain text, and never reaches the gate or a handler."""
    reply = _raw_exchange(api_url, b"POST /v1/submissions HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n"
                                   b"Content-Length: 12abc\r\nConnection: close\r\n\r\n{}")
    assert reply.startswith(b"HTTP/1.1 400 ")
    assert b"problem+json" not in reply.split(b"\r\n\r\n", 1)[0]


def test_a_server_that_passes_a_non_numeric_content_length_through_gets_bad_request(
        settings: Settings, migrated: str) -> None:
    """Behind an ASGI server that hands the header over unparsed, the gate answers bad-request before any body is
    read (the body here is never asked for)."""
    sent: list[MutableMapping[str, Any]] = []

    async def receive() -> MutableMapping[str, Any]:
        raise AssertionError("the gate read the body of a request it should refuse first")

    async def send(message: MutableMapping[str, Any]) -> None:
        sent.append(message)

    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST", "scheme": "http",
             "path": "/v1/submissions", "raw_path": b"/v1/submissions", "query_string": b"", "root_path": "",
             "headers": [(b"content-type", b"application/json"), (b"content-length", b"12abc")],
             "client": ("127.0.0.1", 40000), "server": ("127.0.0.1", 80)}
    asyncio.run(create_app(settings)(scope, receive, send))
    start, body = sent[0], b"".join(m.get("body", b"") for m in sent[1:])
    assert start["status"] == 400 and (b"content-type", PROBLEM.encode()) in start["headers"]
    assert json.loads(body)["type"] == "urn:kernelproof:problem:bad-request"


def test_a_gpu_class_no_worker_serves_is_refused_where_the_operator_lists_classes(
        settings: Settings, migrated: str, api_key: str) -> None:
    listed = settings.model_copy(update={"gpu_classes": ["h200", "a100"]})
    auth = {**JSON, "Authorization": f"Bearer {api_key}"}
    with TestClient(create_app(listed), raise_server_exceptions=False) as client:
        response = client.post("/v1/submissions", content=with_(gpu_class="mi300"), headers=auth)
        assert response.status_code == 422 and response.headers["content-type"] == PROBLEM
        assert response.json()["type"] == "urn:kernelproof:problem:unknown-gpu-class"
        assert response.json()["detail"] == "known GPU classes: h200, a100"
        listed_class = client.post("/v1/submissions", content=with_(gpu_class="a100"), headers=auth)
    assert listed_class.status_code == 202, listed_class.text[:300]
