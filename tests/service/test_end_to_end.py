"""Submit -> Celery worker -> verdict -> report -> SQL views, for a passing and a failing candidate."""

from __future__ import annotations

import subprocess
from typing import Any

import httpx
from sqlalchemy import text
from sqlalchemy.orm import Session, sessionmaker

from tests.service.candidates import GOOD, NO_WEIGHT
from tests.service.conftest import TINY_CAMPAIGN, wait_final


def submit(http: httpx.Client, source: str, campaign: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
    body = {"task": "rms_norm", "source": source, "campaign": campaign or TINY_CAMPAIGN, **extra}
    response = http.post("/v1/submissions", json=body)
    assert response.status_code == 202, response.text
    assert response.headers["location"] == f"/v1/submissions/{response.json()['id']}"
    return dict(response.json())


def view_rows(sessions: sessionmaker[Session], sql: str, **params: Any) -> list[dict[str, Any]]:
    with sessions() as session:
        return [dict(r) for r in session.execute(text(sql), params).mappings()]


def test_passing_candidate_end_to_end(
    http: httpx.Client, celery_worker: subprocess.Popen[bytes], sessions: sessionmaker[Session]
) -> None:
    created = submit(http, GOOD, metadata={"generator": "grpo", "model": "m-1", "run_id": "r1", "tags": ["e2e"]})
    assert created["state"] == "queued" and created["verdict"] is None

    done = wait_final(http, created["id"])
    assert done["state"] == "finished", done
    assert done["verdict"] == "pass" and done["attempts"] == 1 and not done["reused"]
    assert done["reward"] is None  # interpreter runs never carry a speed reward
    assert done["summary"]["cases_passed"] == done["summary"]["cases_total"] == 1

    report = http.get(done["report_url"]).json()
    assert report["kind"] == "kernelproof.report" and report["summary"]["verdict"] == "pass"
    assert report["candidates"][0]["origin"] == "submission"
    assert report["cases"][0]["timing"]["kind"] == "interpreter_wall_clock"
    markdown = http.get(done["report_markdown_url"])
    assert markdown.status_code == 200 and markdown.headers["content-type"].startswith("text/markdown")
    assert "pass" in markdown.text

    rows = view_rows(sessions, "SELECT * FROM v_submission_rewards WHERE submission_id = :i", i=done["id"])
    assert len(rows) == 1 and rows[0]["verdict"] == "pass" and rows[0]["generator"] == "grpo"
    timings = view_rows(sessions, "SELECT * FROM v_case_timings WHERE submission_id = :i", i=done["id"])
    assert [t["case_id"] for t in timings] == ["n1"] and timings[0]["timing_kind"] == "interpreter_wall_clock"
    samples = view_rows(sessions, "SELECT candidate_samples_us FROM timings")
    assert len(samples) == 1 and len(samples[0]["candidate_samples_us"]) >= 1
    daily = view_rows(sessions, "SELECT * FROM v_reward_daily WHERE generator = 'grpo'")
    assert daily[0]["submissions"] == 1 and daily[0]["passed"] == 1
    env = view_rows(sessions, "SELECT device, harness_version FROM environments")
    assert env[0]["device"] == "interpreter"

    listed = http.get("/v1/submissions", params={"tag": "e2e", "verdict": "pass"}).json()
    assert [s["id"] for s in listed["items"]] == [done["id"]]
    board = http.get("/v1/leaderboard", params={"task": "rms_norm", "dtype": "bfloat16"}).json()["entries"]
    assert board[0]["submission_id"] == done["id"] and board[0]["cases_passed"] == 1


def test_failing_candidate_end_to_end(
    http: httpx.Client, celery_worker: subprocess.Popen[bytes], sessions: sessionmaker[Session]
) -> None:
    created = submit(
        http,
        NO_WEIGHT,
        {"preset": "quick", "case_ids": ["tail127"], "measure": False},
        metadata={"generator": "grpo", "model": "m-2"},
    )
    done = wait_final(http, created["id"])
    assert done["state"] == "finished" and done["verdict"] == "tolerance", done
    assert done["reward"] == -1.0
    assert done["summary"]["first_failure"]["code"] == "tolerance"

    report = http.get(f"/v1/submissions/{done['id']}/report").json()
    case = report["cases"][0]
    assert case["verdict"] == "tolerance" and case["error"]["max_abs"] > 0

    mix = view_rows(sessions, "SELECT verdict, submissions FROM v_verdict_mix WHERE model = 'm-2'")
    assert mix == [{"verdict": "tolerance", "submissions": 1}]
    rewards = view_rows(
        sessions, "SELECT scope, value, spec FROM rewards WHERE submission_id = :i ORDER BY scope", i=done["id"]
    )
    assert [(r["scope"], r["value"]) for r in rewards] == [("case", -1.0), ("run", -1.0)]
    assert rewards[0]["spec"] == "kernelproof.reward.v2"
    errors = view_rows(
        sessions, "SELECT max_abs, rel_l2, numel FROM case_results WHERE submission_id = :i", i=done["id"]
    )
    assert errors[0]["max_abs"] > 0 and errors[0]["numel"] > 0
    assert http.get("/v1/leaderboard", params={"task": "rms_norm"}).json()["entries"] == []


def test_identical_resubmission_is_answered_from_the_stored_verdict(
    http: httpx.Client, celery_worker: subprocess.Popen[bytes], sessions: sessionmaker[Session]
) -> None:
    first = wait_final(
        http, submit(http, NO_WEIGHT, {"preset": "quick", "case_ids": ["tail127"], "measure": False})["id"]
    )
    again = submit(http, NO_WEIGHT, {"preset": "quick", "case_ids": ["tail127"], "measure": False})
    assert again["state"] == "finished" and again["reused"] and again["reused_from"] == first["id"]
    assert again["verdict"] == first["verdict"] and again["reward"] == first["reward"]
    report = http.get(again["report_url"])
    assert report.headers["x-kernelproof-reused-from"] == first["id"]
    assert report.json()["summary"]["verdict"] == "tolerance"

    different = submit(
        http, NO_WEIGHT, {"preset": "quick", "case_ids": ["tail127"], "measure": False}, dtypes=["float16"]
    )
    assert different["state"] == "queued" and not different["reused"]  # another dtype is another question
    rows = view_rows(sessions, "SELECT reused FROM v_submission_rewards ORDER BY created_at")
    assert [r["reused"] for r in rows] == [0, 1]
    wait_final(http, different["id"])
