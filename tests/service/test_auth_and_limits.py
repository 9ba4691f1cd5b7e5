"""API keys (hashed, revocable), per-key rate limits with Retry-After, and the open operational endpoints."""

from __future__ import annotations

import httpx
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from kernelproof_core.store import keys
from kernelproof_core.store.models import ApiKey

PROBLEM = "application/problem+json"


def test_requests_without_a_valid_key_are_refused(api_url: str, sessions: sessionmaker[Session]) -> None:
    with sessions() as session:
        good = keys.create_key(session, "auth-test")
    missing = httpx.get(f"{api_url}/v1/tasks")
    assert missing.status_code == 401 and missing.headers["content-type"] == PROBLEM
    assert missing.json()["type"] == "urn:kernelproof:problem:unauthorized"
    assert missing.headers["www-authenticate"].startswith("Bearer")
    wrong = httpx.get(f"{api_url}/v1/tasks", headers={"Authorization": "Bearer kp_not-a-real-key"})
    assert wrong.status_code == 401
    # Refused before the body is even parsed: no validation details leak to anonymous callers.
    anonymous_post = httpx.post(f"{api_url}/v1/submissions", content=b"{", headers={"Content-Type": "application/json"})
    assert anonymous_post.status_code == 401

    assert httpx.get(f"{api_url}/v1/tasks", headers={"Authorization": f"Bearer {good.plaintext}"}).status_code == 200
    assert httpx.get(f"{api_url}/v1/tasks", headers={"X-API-Key": good.plaintext}).status_code == 200

    with sessions() as session:
        stored = session.scalars(select(ApiKey)).one()
        assert good.plaintext not in (stored.key_hash, stored.prefix) and len(stored.key_hash) == 64
        assert keys.revoke_key(session, good.prefix) == 1
    revoked = httpx.get(f"{api_url}/v1/tasks", headers={"Authorization": f"Bearer {good.plaintext}"})
    assert revoked.status_code == 401


def test_operational_endpoints_need_no_key(api_url: str, sessions: sessionmaker[Session]) -> None:
    assert httpx.get(f"{api_url}/healthz").json() == {"status": "ok", "checks": {}}
    ready = httpx.get(f"{api_url}/readyz")
    assert ready.status_code == 200 and ready.json()["checks"] == {"database": "ok", "broker": "ok"}
    metrics = httpx.get(f"{api_url}/metrics")
    assert metrics.status_code == 200
    for name in (
        "kernelproof_queue_depth",
        "kernelproof_verdicts",
        "kernelproof_verification_seconds_bucket",
        "kernelproof_http_requests_total",
        "kernelproof_broker_queue_messages",
    ):
        assert name in metrics.text


def test_rate_limit_answers_429_with_retry_after(api_url: str, sessions: sessionmaker[Session]) -> None:
    with sessions() as session:
        limited = keys.create_key(session, "limited", rate_limit_per_minute=3).plaintext
        other = keys.create_key(session, "other").plaintext
    headers = {"Authorization": f"Bearer {limited}"}
    # Seven requests span at most two one-minute windows, so one window must exceed the limit of three.
    responses = [httpx.get(f"{api_url}/v1/tasks/rms_norm", headers=headers) for _ in range(7)]
    refused = [r for r in responses if r.status_code == 429]
    assert refused and {r.status_code for r in responses} <= {200, 429}
    first = refused[0]
    assert first.headers["content-type"] == PROBLEM
    assert first.json()["type"] == "urn:kernelproof:problem:rate-limited"
    assert 1 <= int(first.headers["retry-after"]) <= 60
    # Limits are per key: another key is unaffected.
    assert httpx.get(f"{api_url}/v1/tasks", headers={"Authorization": f"Bearer {other}"}).status_code == 200
