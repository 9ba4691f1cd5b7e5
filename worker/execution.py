"""Processing one submission, shared by the Celery task and the embedded worker: claim it (compare-and-set),
run the attempt in the job process under the attempt's deadline, then record the verdict or release the
attempt."""

from __future__ import annotations

import logging
import os
import socket
import time
from collections.abc import Callable

from sqlalchemy.orm import Session, sessionmaker

from kernelproof_core.settings import Settings
from kernelproof_core.store import results, transitions
from kernelproof_core.store.transitions import ClaimOutcome
from kernelproof_core.verdicts import Verdict
from worker.job_host import AttemptResult, JobHost

log = logging.getLogger(__name__)

Redispatch = Callable[[str, str | None], None]


def worker_name(kind: str) -> str:
    return f"{kind}@{socket.gethostname()}:{os.getpid()}"


def process_submission(
    sessions: sessionmaker[Session],
    settings: Settings,
    submission_id: str,
    worker: str,
    redispatch: Redispatch,
    host: JobHost,
) -> str:
    """Claim, verify and record one submission; returns what happened (for logs and tests)."""
    with sessions() as session:
        outcome, claim = transitions.claim(
            session,
            submission_id,
            worker=worker,
            gpu_class=settings.worker_gpu_class,
            deadline_s=settings.job_deadline_s,
            max_attempts=settings.job_max_attempts,
        )
    if outcome is not ClaimOutcome.CLAIMED or claim is None:
        log.info("submission %s: not claimed (%s)", submission_id, outcome.value)
        return outcome.value
    started = time.monotonic()
    log.info("submission %s: attempt %d on %s", submission_id, claim.attempt_no, worker)
    try:
        attempt = host.run(claim, settings.sandbox_enabled)
    except Exception as exc:  # spawning failed (disk full, fork limits): an infrastructure fault
        log.exception("submission %s: could not run the job process", submission_id)
        attempt = AttemptResult(None, f"could not run the job process: {type(exc).__name__}: {exc}")
    report = attempt.report
    error = attempt.error
    if (
        report is not None
        and report.summary.verdict is Verdict.INFRA_ERROR
        and (claim.attempt_no < settings.job_max_attempts)
    ):
        first = report.summary.first_failure
        error, report = f"infra_error: {first.message if first else 'no detail'}", None
    with sessions() as session:
        if report is not None:
            recorded = results.finish_with_report(session, claim, report)
            status = report.summary.verdict.value if recorded else "stale"
        else:
            status = transitions.release_failed_attempt(
                session, claim, error or "unknown failure", settings.job_max_attempts
            )
    log.info(
        "submission %s: attempt %d -> %s in %.1f s",
        submission_id,
        claim.attempt_no,
        status,
        time.monotonic() - started,
    )
    if status == "requeued":
        redispatch(submission_id, claim.gpu_class)
    return status
