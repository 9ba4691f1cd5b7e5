"""The job process the workers run attempts in: warm across attempts with the sandbox, fresh without it, killed
at the attempt deadline and replaced, and never the worker's own process."""

from __future__ import annotations

import os
from datetime import timedelta

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
