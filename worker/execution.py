"""Processing one submission, shared by the Celery task and the embedded worker: claim it (compare-and-set),
run the attempt in the job process under the attempt's deadline, then record the verdict or release the
attempt."""

from __future__ import annotations

import logging
import os
import socket
import time
from collections.abc import Callable

from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from kernelproof_core.report.models import Report
from kernelproof_core.settings import Settings
from kernelproof_core.store import results, transitions
from kernelproof_core.store.models import ReportRow
from kernelproof_core.store.session import UNAVAILABLE_ERRORS
from kernelproof_core.store.transitions import Claim, ClaimOutcome
from kernelproof_core.verdicts import Verdict
from worker.job_host import AttemptResult, JobHost
from worker.lease import LeaseKeeper

log = logging.getLogger(__name__)

Redispatch = Callable[[str, str | None], None]
RECORD_BACKOFF_S = (0.5, 10.0)  # first and longest pause between attempts to write a verdict


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
            lease_s=settings.job_lease_s,
        )
    if outcome is not ClaimOutcome.CLAIMED or claim is None:
        log.info("submission %s: not claimed (%s)", submission_id, outcome.value)
        return outcome.value
    started = time.monotonic()
    log.info("submission %s: attempt %d on %s", submission_id, claim.attempt_no, worker)
    with LeaseKeeper(sessions, claim, settings.job_lease_s):  # held through the run and the write of its verdict
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
        status = _record(sessions, settings, claim, report, error)
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


def _record(sessions: sessionmaker[Session], settings: Settings, claim: Claim, report: Report | None,
            error: str | None) -> str:
    """Write the attempt's verdict, or release the attempt. While the database does not answer, keep trying for
    worker_record_retry_s: the verification already spent its GPU time, and giving up leaves the submission to the
    sweeper once its lease lapses, to be verified again. Each try is one transaction, compare-and-set on the claim."""
    give_up = time.monotonic() + settings.worker_record_retry_s
    pause, longest = RECORD_BACKOFF_S
    retrying = False
    while True:
        try:
            with sessions() as session:
                if report is not None:
                    # A commit whose answer was lost may have landed: then this attempt's report is there, and
                    # finishing again would only fail the compare-and-set and mark the attempt stale.
                    mine = select(ReportRow.submission_id).where(ReportRow.attempt_id == claim.attempt_id)
                    if retrying and session.scalar(mine) is not None:
                        return report.summary.verdict.value
                    recorded = results.finish_with_report(session, claim, report)
                    return report.summary.verdict.value if recorded else "stale"
                return transitions.release_failed_attempt(
                    session, claim, error or "unknown failure", settings.job_max_attempts
                )
        except UNAVAILABLE_ERRORS as exc:
            if time.monotonic() + pause > give_up:
                log.error("submission %s: attempt %d could not be recorded (the database did not answer for "
                          "%.0f s); the sweeper will run it again", claim.submission_id, claim.attempt_no,
                          settings.worker_record_retry_s)
                raise
            log.warning("submission %s: attempt %d not recorded yet, the database did not answer (%s); retrying in "
                        "%.1f s", claim.submission_id, claim.attempt_no, type(exc).__name__, pause)
            time.sleep(pause)
            pause = min(longest, 2 * pause)
            retrying = True
