"""Exactly one final verdict whatever the queue does: lost messages, duplicate deliveries, crashing jobs and a
worker SIGKILLed in the middle of a verification."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from api.app import create_app
from kernelproof_core.settings import Settings
from kernelproof_core.store.models import Attempt, CaseResultRow, ReportRow
from tests.service.candidates import GOOD, SELF_KILLING, slow_once
from tests.service.conftest import SESSION_TAG, TINY_CAMPAIGN, start_worker, stop_process, wait_final
from tests.service.test_api_surface import NullDispatcher

BODY: dict[str, Any] = {"task": "rms_norm", "source": GOOD, "campaign": {**TINY_CAMPAIGN, "measure": False}}


def attempts_of(sessions: sessionmaker[Session], submission_id: str) -> list[str | None]:
    with sessions() as session:
        rows = session.scalars(
            select(Attempt).where(Attempt.submission_id == submission_id).order_by(Attempt.attempt_no)
        )
        return [a.outcome for a in rows]


def result_rows(sessions: sessionmaker[Session], submission_id: str) -> tuple[int, int]:
    with sessions() as session:
        reports = session.scalar(
            select(func.count()).select_from(ReportRow).where(ReportRow.submission_id == submission_id)
        )
        cases = session.scalar(
            select(func.count()).select_from(CaseResultRow).where(CaseResultRow.submission_id == submission_id)
        )
        return int(reports or 0), int(cases or 0)


def job_processes_of(worker_pid: int) -> list[int]:
    """Job processes spawned by `worker_pid` that are still alive (they carry their parent's pid in the env)."""
    found = []
    for proc in Path("/proc").iterdir():
        try:
            if b"worker.job_process" not in (proc / "cmdline").read_bytes():
                continue
            if f"KERNELPROOF_JOB_PARENT_PID={worker_pid}".encode() in (proc / "environ").read_bytes().split(b"\0"):
                found.append(int(proc.name))
        except (OSError, ValueError):
            continue
    return found


def wait_until(condition: Any, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.1)
    return False


def test_lost_message_is_resent_by_the_sweeper(
    settings: Settings, sessions: sessionmaker[Session], api_key: str, celery_worker: subprocess.Popen[bytes]
) -> None:
    app = create_app(settings, dispatcher=NullDispatcher())  # commits the row, never sends the message
    with TestClient(app, headers={"Authorization": f"Bearer {api_key}"}) as client:
        sub = client.post("/v1/submissions", json=BODY).json()
        deadline = time.monotonic() + 60
        while (state := client.get(f"/v1/submissions/{sub['id']}", params={"wait": 5}).json())["state"] not in (
            "finished",
            "error",
        ):
            assert time.monotonic() < deadline, state
    assert state["verdict"] == "pass" and state["attempts"] == 1
    assert result_rows(sessions, sub["id"]) == (1, 1)


def test_duplicate_delivery_gives_one_verdict(
    http: httpx.Client, settings: Settings, sessions: sessionmaker[Session], celery_worker: subprocess.Popen[bytes]
) -> None:
    from worker.dispatch import CeleryDispatcher

    sub = http.post("/v1/submissions", json=BODY).json()
    duplicate = CeleryDispatcher(settings)
    duplicate.dispatch(sub["id"], None)
    duplicate.dispatch(sub["id"], None)
    done = wait_final(http, sub["id"])
    assert done["verdict"] == "pass" and done["attempts"] == 1
    time.sleep(1.0)  # let the duplicate messages arrive and be dropped
    assert attempts_of(sessions, sub["id"]) == ["finished"]
    assert result_rows(sessions, sub["id"]) == (1, 1)


def test_repeatedly_crashing_job_ends_as_infra_error(
    http: httpx.Client, sessions: sessionmaker[Session], celery_worker: subprocess.Popen[bytes]
) -> None:
    sub = http.post("/v1/submissions", json={**BODY, "source": SELF_KILLING}).json()
    done = wait_final(http, sub["id"], timeout=180)
    assert done["state"] == "error" and done["verdict"] == "infra_error" and done["reward"] is None
    assert done["attempts"] == 3 and "gave up after 3 attempts" in done["error"]
    assert attempts_of(sessions, sub["id"]) == ["failed", "failed", "failed"]
    no_report = http.get(f"/v1/submissions/{sub['id']}/report")
    assert no_report.status_code == 404 and no_report.json()["type"].endswith("no-report")


@pytest.mark.timeout(240)
def test_sigkill_of_the_worker_mid_verification_still_ends_in_one_verdict(
    http: httpx.Client,
    service_env: dict[str, str],
    sessions: sessionmaker[Session],
    celery_worker: subprocess.Popen[bytes],
    tmp_path: Path,
) -> None:
    queue = [f"kptest{SESSION_TAG}.sigkill"]
    # The attempt may run 90 s (JOB_DEADLINE_S) but holds its row for a 6 s lease at a time (JOB_LEASE_S, conftest):
    # once the victim stops renewing, the sweeper re-queues the job within a lease, not after the 90 s.
    short = {**service_env, "KERNELPROOF_CELERY_VISIBILITY_TIMEOUT_S": "10"}
    victim = start_worker(short, queue, tmp_path / "victim.log", f"victim-{SESSION_TAG}")
    mark = tmp_path / "first-attempt-started"
    try:
        sub = http.post("/v1/submissions", json={**BODY, "source": slow_once(str(mark)), "gpu_class": "sigkill"})
        assert sub.status_code == 202, sub.text
        sid = sub.json()["id"]
        deadline = time.monotonic() + 60
        while not mark.exists():
            assert time.monotonic() < deadline, (tmp_path / "victim.log").read_text()[-2000:]
            time.sleep(0.1)
        assert http.get(f"/v1/submissions/{sid}").json()["state"] == "running"
        assert job_processes_of(victim.pid), "the attempt should run in a job process of the worker"
        os.kill(victim.pid, signal.SIGKILL)  # mid-verification: the job hangs inside the candidate
        killed_at = time.monotonic()
        victim.wait(10)
        assert wait_until(lambda: not job_processes_of(victim.pid)), "the job process outlived its worker"
    finally:
        stop_process(victim)
    rescuer = start_worker(service_env, queue, tmp_path / "rescuer.log", f"rescuer-{SESSION_TAG}")
    try:
        done = wait_final(http, sid, timeout=120)
    finally:
        stop_process(rescuer)
    assert done["state"] == "finished" and done["verdict"] == "pass", done
    assert time.monotonic() - killed_at < 60, "re-queued after the job deadline, not after the lease"
    assert done["attempts"] == 2
    assert attempts_of(sessions, sid) == ["lost", "finished"]
    assert result_rows(sessions, sid) == (1, 1)
