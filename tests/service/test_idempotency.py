"""Idempotency-Key semantics: retries replay, a changed payload is refused, concurrent duplicates make one row."""

from __future__ import annotations

import concurrent.futures
from typing import Any

import httpx
from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from kernelproof_core.store.models import Submission
from tests.service.candidates import GOOD, NO_WEIGHT
from tests.service.conftest import TINY_CAMPAIGN

BODY: dict[str, Any] = {"task": "rms_norm", "source": NO_WEIGHT, "campaign": {**TINY_CAMPAIGN, "measure": False}}
PROBLEM = "application/problem+json"


def count_submissions(sessions: sessionmaker[Session]) -> int:
    with sessions() as session:
        return int(session.scalar(select(func.count()).select_from(Submission)) or 0)


def test_retry_with_same_key_and_payload_returns_the_same_submission(
    http: httpx.Client, sessions: sessionmaker[Session]
) -> None:
    first = http.post("/v1/submissions", json=BODY, headers={"Idempotency-Key": "retry-1"})
    second = http.post("/v1/submissions", json=dict(reversed(BODY.items())), headers={"Idempotency-Key": "retry-1"})
    assert first.status_code == second.status_code == 202
    assert first.json()["id"] == second.json()["id"]
    assert second.headers["idempotent-replayed"] == "true" and "idempotent-replayed" not in first.headers
    assert count_submissions(sessions) == 1


def test_same_key_with_a_different_payload_is_rejected(http: httpx.Client, sessions: sessionmaker[Session]) -> None:
    first = http.post("/v1/submissions", json=BODY, headers={"Idempotency-Key": "k-2"})
    changed = http.post("/v1/submissions", json={**BODY, "source": GOOD}, headers={"Idempotency-Key": "k-2"})
    assert changed.status_code == 422 and changed.headers["content-type"] == PROBLEM
    problem = changed.json()
    assert problem["type"] == "urn:kernelproof:problem:idempotency-key-reused"
    assert problem["submission_id"] == first.json()["id"]
    assert count_submissions(sessions) == 1


def test_keys_are_scoped_per_api_key(http: httpx.Client, api_url: str, sessions: sessionmaker[Session]) -> None:
    from kernelproof_core.store import keys

    with sessions() as session:
        other_key = keys.create_key(session, "other").plaintext
    mine = http.post("/v1/submissions", json=BODY, headers={"Idempotency-Key": "shared"})
    theirs = httpx.post(
        f"{api_url}/v1/submissions",
        json={**BODY, "source": GOOD},
        headers={"Idempotency-Key": "shared", "Authorization": f"Bearer {other_key}"},
    )
    assert mine.status_code == theirs.status_code == 202
    assert mine.json()["id"] != theirs.json()["id"]


def test_concurrent_duplicate_posts_create_one_submission(
    http: httpx.Client, api_url: str, sessions: sessionmaker[Session]
) -> None:
    headers = {**http.headers, "Idempotency-Key": "burst-1"}

    def post(_: int) -> httpx.Response:
        return httpx.post(f"{api_url}/v1/submissions", json=BODY, headers=headers, timeout=60)

    with concurrent.futures.ThreadPoolExecutor(max_workers=12) as pool:
        responses = list(pool.map(post, range(24)))
    assert {r.status_code for r in responses} == {202}
    assert len({r.json()["id"] for r in responses}) == 1
    assert count_submissions(sessions) == 1


def test_batch_reports_per_item_results_and_replays_on_retry(
    http: httpx.Client, sessions: sessionmaker[Session]
) -> None:
    items = [BODY, {**BODY, "task": "no_such_task"}, {"task": "rms_norm"}, {**BODY, "dtypes": ["float16"]}]
    first = http.post("/v1/submissions/batch", json={"items": items}, headers={"Idempotency-Key": "batch-1"})
    assert first.status_code == 200, first.text
    results = first.json()["results"]
    assert [r["status"] for r in results] == [202, 422, 422, 202]
    assert results[1]["problem"]["type"] == "urn:kernelproof:problem:unknown-task"
    assert results[2]["problem"]["type"] == "urn:kernelproof:problem:validation-error"
    assert results[2]["problem"]["instance"] == "/v1/submissions/batch#items/2"
    retry = http.post("/v1/submissions/batch", json={"items": items}, headers={"Idempotency-Key": "batch-1"})
    again = retry.json()["results"]
    assert [r["submission"]["id"] for r in again if r["submission"]] == [
        r["submission"]["id"] for r in results if r["submission"]
    ]
    assert count_submissions(sessions) == 2
