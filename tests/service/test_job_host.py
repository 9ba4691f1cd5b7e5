"""The job process the workers run attempts in: warm across attempts with the sandbox, fresh without it, killed
at the attempt deadline and replaced, and never the worker's own process."""

from __future__ import annotations

import os
import threading
import time
from datetime import timedelta
from typing import Any

import pytest

from kernelproof_core.campaign import Campaign, CandidateJob
from kernelproof_core.store.transitions import Claim
from kernelproof_core.store.types import utcnow
from tests.service.candidates import GOOD
from worker.job_host import JobHost

CAMPAIGN = Campaign(device="interpreter", dtypes=["bfloat16"], case_set="interpreter", case_ids=["n1"], measure=False)
HANGS = GOOD + "\n\nimport time\n\n\ndef candidate(x, weight, eps):\n    time.sleep(600)\n"


def make_claim(source: str, attempt: int = 1, deadline_s: float = 120.0) -> Claim:
    now = utcnow()
    job = CandidateJob(task="rms_norm", source=source.encode(), origin="submission")
    return Claim(
        submission_id=f"{attempt:032x}",
        attempt_no=attempt,
        attempt_id=attempt,
        job=job,
        campaign=CAMPAIGN,
        gpu_class=None,
        started_at=now,
        deadline_at=now + timedelta(seconds=deadline_s),
    )


def host_pid(host: JobHost) -> int | None:
    proc = host._proc  # the job process (an implementation detail this test pins down)
    return proc.pid if proc is not None and proc.poll() is None else None


def test_sandboxed_host_stays_warm_between_attempts() -> None:
    host = JobHost(persistent=True)
    try:
        first = host.run(make_claim(GOOD, 1), sandbox=True)
        pid = host_pid(host)
        second = host.run(make_claim(GOOD, 2), sandbox=True)
        assert first.report is not None and second.report is not None, (first.error, second.error)
        assert first.report.isolation.sandboxed and second.report.summary.verdict.value == "pass"
        assert pid is not None and pid != os.getpid() and host_pid(host) == pid
    finally:
        host.close()
    assert host_pid(host) is None


def test_unsandboxed_attempts_get_a_fresh_process_each() -> None:
    host = JobHost(persistent=False)
    result = host.run(make_claim(GOOD), sandbox=False)
    assert result.report is not None and not result.report.isolation.sandboxed
    assert host_pid(host) is None  # gone after the attempt


def test_deadline_kills_the_job_process_and_the_next_attempt_gets_a_new_one() -> None:
    host = JobHost(persistent=True)
    try:
        hung = host.run(make_claim(HANGS, 1, deadline_s=4.0), sandbox=False)
        assert hung.report is None and hung.error is not None and "deadline" in hung.error
        assert host_pid(host) is None
        after = host.run(make_claim(GOOD, 2), sandbox=False)
        assert after.report is not None and after.report.summary.verdict.value == "pass"
    finally:
        host.close()


def _concurrently(host: JobHost, claims: list[Claim]) -> list[tuple[float, float, Any]]:
    """Run the claims from one thread each; (start, end, result) per claim."""
    out: list[tuple[float, float, Any]] = [(0.0, 0.0, None)] * len(claims)

    def one(i: int) -> None:
        start = time.monotonic()
        result = host.run(claims[i], sandbox=True)
        out[i] = (start, time.monotonic(), result)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(len(claims))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    return out


def test_overlapped_host_serves_attempts_at_once_from_one_job_process(monkeypatch: pytest.MonkeyPatch) -> None:
    """KERNELPROOF_WORKER_OVERLAP=2: two worker threads' attempts are answered by one job process, which verifies
    them at once (sandbox/overlap.py); each gets its own report."""
    monkeypatch.setenv("KERNELPROOF_WORKER_OVERLAP", "2")
    host = JobHost(persistent=True)
    try:
        host.run(make_claim(GOOD, 1), sandbox=True)  # starts the job process and its executors
        pid = host_pid(host)
        slow = GOOD + "\n# a distinct source\n"
        results = _concurrently(host, [make_claim(GOOD, 2), make_claim(slow, 3)])
        reports = [r.report for _, _, r in results]
        assert all(r is not None for r in reports), [r.error for _, _, r in results]
        assert len({r.candidates[0].source_sha256 for r in reports if r is not None}) == 2  # each its own report
        assert all(r.summary.verdict.value == "pass" for r in reports if r is not None)
        assert host_pid(host) == pid  # one job process served both
        # They ran at once: each report's verification window overlaps the other's.
        windows = [(r.created_at.timestamp() - r.duration_s, r.created_at.timestamp()) for r in reports if r]
        assert windows[0][0] < windows[1][1] and windows[1][0] < windows[0][1], windows
    finally:
        host.close()


def test_a_deadline_in_an_overlapped_host_fails_the_sharing_attempt_as_ours(monkeypatch: pytest.MonkeyPatch) -> None:
    """One attempt past its deadline kills the shared job process: it gets the deadline error, the attempt sharing
    the process an infrastructure error (retried by the queue), and the next attempt a fresh process."""
    monkeypatch.setenv("KERNELPROOF_WORKER_OVERLAP", "2")
    host = JobHost(persistent=True)
    try:
        host.run(make_claim(GOOD, 1), sandbox=True)
        results = _concurrently(host, [make_claim(HANGS, 2, deadline_s=6.0), make_claim(HANGS, 3, deadline_s=60.0)])
        first, second = (r for _, _, r in results)
        assert first.report is None and first.error is not None and "deadline" in first.error
        assert second.report is None and second.error is not None and "another attempt" in second.error
        after = host.run(make_claim(GOOD, 4), sandbox=True)
        assert after.report is not None and after.report.summary.verdict.value == "pass", after.error
    finally:
        host.close()
