"""Tasks, listing with filters and cursors, reports of unfinished work, readiness failures, and the OpenAPI
document (every operation documents its problems; request bodies carry examples)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import httpx
from fastapi.testclient import TestClient
from sqlalchemy.orm import Session, sessionmaker

from api.app import create_app
from kernelproof_core.settings import Settings
from kernelproof_core.store.models import Submission, SubmissionTag
from kernelproof_core.store.types import utcnow
from tests.service.candidates import GOOD
from tests.service.conftest import NullDispatcher, free_port


def test_tasks_describe_signatures_cases_and_tolerances(http: httpx.Client) -> None:
    tasks = http.get("/v1/tasks").json()
    assert {t["name"] for t in tasks} >= {"rms_norm"}
    rms = http.get("/v1/tasks/rms_norm").json()
    assert rms["reward_spec"] == "kernelproof.reward.v2"
    assert set(rms["tolerances"]) == set(rms["dtypes"]) and "atol" in rms["tolerances"]["bfloat16"]
    assert "n1" in {c["case_id"] for c in rms["public_cases"]["interpreter"]}
    assert rms["presets"]["quick"]["max_default_dtypes"] == 1


def _insert(sessions: sessionmaker[Session], n: int) -> tuple[list[str], datetime]:
    base = utcnow() - timedelta(hours=1)
    ids = []
    with sessions() as session:
        for i in range(n):
            sid = f"{i:032x}"
            session.add(
                Submission(
                    id=sid,
                    request_sha256="0" * 64,
                    task="rms_norm" if i % 2 else "softmax",
                    source_text="x",
                    source_sha256=f"{i:064x}",
                    dtypes=["bfloat16"],
                    campaign={},
                    meta={"generator": f"g{i % 3}"},
                    generator=f"g{i % 3}",
                    cache_key=f"{i:064x}",
                    state="finished",
                    verdict="pass" if i % 4 else "tolerance",
                    attempts=1,
                    created_at=base + timedelta(minutes=i),
                    finished_at=base,
                )
            )
            session.flush()
            if i % 5 == 0:
                session.add(SubmissionTag(submission_id=sid, tag="five"))
            ids.append(sid)
        session.commit()
    return ids, base


def test_list_filters_and_cursor_pagination(http: httpx.Client, sessions: sessionmaker[Session]) -> None:
    ids, base = _insert(sessions, 23)
    seen: list[str] = []
    cursor = None
    while True:
        params = {"limit": 5, **({"cursor": cursor} if cursor else {})}
        page = http.get("/v1/submissions", params=params).json()
        seen += [s["id"] for s in page["items"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert seen == list(reversed(ids))  # newest first, every row exactly once
    assert len(http.get("/v1/submissions", params={"task": "rms_norm"}).json()["items"]) == 11
    assert len(http.get("/v1/submissions", params={"verdict": "tolerance"}).json()["items"]) == 6
    assert len(http.get("/v1/submissions", params={"tag": "five"}).json()["items"]) == 5
    assert len(http.get("/v1/submissions", params={"generator": "g1"}).json()["items"]) == 8
    middle = (base + timedelta(minutes=10, seconds=30)).isoformat()  # after row 10, before row 11
    after = http.get("/v1/submissions", params={"created_after": middle, "limit": 100}).json()["items"]
    assert [s["id"] for s in after] == list(reversed(ids[11:]))
    before = http.get("/v1/submissions", params={"created_before": middle, "limit": 100}).json()["items"]
    assert len(before) == 11


def test_report_of_unfinished_submission_and_lost_dispatch(
    settings: Settings, sessions: sessionmaker[Session], api_key: str
) -> None:
    app = create_app(settings, dispatcher=NullDispatcher())
    with TestClient(app, raise_server_exceptions=False, headers={"Authorization": f"Bearer {api_key}"}) as client:
        sub = client.post("/v1/submissions", json={"task": "rms_norm", "source": GOOD, "campaign": "quick"}).json()
        assert sub["state"] == "queued" and sub["report_url"] is None
        pending = client.get(f"/v1/submissions/{sub['id']}/report")
        assert pending.status_code == 409 and pending.json()["type"].endswith("report-not-ready")
        started = datetime.now(UTC)
        polled = client.get(f"/v1/submissions/{sub['id']}", params={"wait": 1.0})
        assert polled.json()["state"] == "queued" and (datetime.now(UTC) - started).total_seconds() >= 0.9


def test_readyz_reports_an_unreachable_broker(settings: Settings, migrated: str) -> None:
    broken = settings.model_copy(update={"broker_url": f"redis://127.0.0.1:{free_port()}/0"})
    with TestClient(create_app(broken), raise_server_exceptions=False) as client:
        response = client.get("/readyz")
    assert response.status_code == 503 and response.headers["content-type"] == "application/problem+json"
    assert response.json()["checks"]["broker"] == "unreachable"


def test_openapi_documents_problems_and_examples(api_url: str) -> None:
    spec = httpx.get(f"{api_url}/openapi.json").json()
    paths = spec["paths"]
    for route in (
        "/v1/submissions",
        "/v1/submissions/batch",
        "/v1/submissions/{submission_id}",
        "/v1/submissions/{submission_id}/report",
        "/v1/submissions/{submission_id}/report.md",
        "/v1/tasks",
        "/v1/tasks/{name}",
        "/v1/leaderboard",
        "/healthz",
        "/readyz",
        "/metrics",
    ):
        assert route in paths, route
    for route, ops in paths.items():
        for method, op in ops.items():
            if route.startswith("/v1"):
                problems = [r for code, r in op["responses"].items() if code.startswith(("4", "5"))]
                assert problems, (method, route)
                assert all("application/problem+json" in r["content"] for r in problems), (method, route)
    schemas = spec["components"]["schemas"]
    assert schemas["SubmissionRequest"]["examples"]
    assert paths["/v1/submissions"]["post"]["responses"]["202"]
    assert {"HTTPBearer", "APIKeyHeader"} <= set(spec["components"]["securitySchemes"])


def test_every_problem_type_is_documented() -> None:
    from api.problems import ALL_PROBLEM_TYPES
    from tests.service.conftest import REPO

    doc = (REPO / "docs" / "API.md").read_text()
    missing = [t.slug for t in ALL_PROBLEM_TYPES if f"`{t.slug}`" not in doc]
    assert not missing and len(ALL_PROBLEM_TYPES) >= 20
