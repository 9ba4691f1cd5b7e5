"""State changes of a submission, each a compare-and-set UPDATE.

The attempt number is the fencing token: a claim increments it, and finishing only succeeds while the row is
still running *that* attempt. So when a message is delivered twice, or a presumed-dead worker comes back after
the sweeper handed its job to another, exactly one verdict is written and the loser's results are discarded.
Every function commits (or rolls back) its own transaction.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import and_, or_, select, update
from sqlalchemy.orm import Session

from kernelproof_core.campaign import Campaign, CandidateJob
from kernelproof_core.store.models import Attempt, State, Submission
from kernelproof_core.store.types import utcnow
from kernelproof_core.verdicts import Verdict


class ClaimOutcome(enum.Enum):
    CLAIMED = "claimed"
    MISSING = "missing"  # no such submission
    FINAL = "final"  # already has its verdict (a duplicate delivery)
    BUSY = "busy"  # another worker runs it and is within its deadline
    EXHAUSTED = "exhausted"  # out of attempts: recorded as infra_error


@dataclass(frozen=True, slots=True)
class Claim:
    submission_id: str
    attempt_no: int
    attempt_id: int
    job: CandidateJob
    campaign: Campaign
    gpu_class: str | None  # as requested (queue routing of a retry)
    started_at: datetime
    deadline_at: datetime


def _rowcount(result: Any) -> int:
    return int(result.rowcount)


def _claimable(submission_id: str, now: datetime) -> Any:
    return and_(
        Submission.id == submission_id,
        or_(
            Submission.state == State.QUEUED.value,
            and_(Submission.state == State.RUNNING.value, Submission.deadline_at < now),
        ),
    )


def claim(
    session: Session,
    submission_id: str,
    *,
    worker: str,
    gpu_class: str | None,
    deadline_s: float,
    max_attempts: int,
    lease_s: float | None = None,
) -> tuple[ClaimOutcome, Claim | None]:
    """Take a queued submission (or one whose running attempt is past its lease) for a new attempt. The attempt may
    run until `deadline_s` (Claim.deadline_at); the row holds it only for `lease_s` at a time (its deadline_at),
    renewed by renew_lease while the attempt runs, so a dead worker's job is re-queued after a lease, not after the
    longest an attempt may take. Without lease_s the row holds it until the attempt's deadline."""
    now = utcnow()
    deadline = now + timedelta(seconds=deadline_s)
    held_until = min(deadline, now + timedelta(seconds=lease_s)) if lease_s else deadline
    result = session.execute(
        update(Submission)
        .where(_claimable(submission_id, now), Submission.attempts < max_attempts)
        .values(
            state=State.RUNNING.value,
            attempts=Submission.attempts + 1,
            started_at=now,
            deadline_at=held_until,
            worker=worker,
            worker_gpu_class=gpu_class,
        )
        .execution_options(synchronize_session=False)
    )
    if _rowcount(result) != 1:
        session.rollback()
        return _why_not_claimed(session, submission_id, now), None
    row = session.execute(
        select(
            Submission.attempts,
            Submission.task,
            Submission.source_text,
            Submission.campaign,
            Submission.gpu_class,
        ).where(Submission.id == submission_id)
    ).one()
    # The previous attempt, if any, never reported back: it is lost.
    session.execute(
        update(Attempt)
        .where(Attempt.submission_id == submission_id, Attempt.outcome.is_(None))
        .values(outcome="lost", finished_at=now, error="no result before its deadline")
    )
    attempt = Attempt(
        submission_id=submission_id,
        attempt_no=row.attempts,
        worker=worker,
        gpu_class=gpu_class,
        started_at=now,
    )
    session.add(attempt)
    session.commit()
    job = CandidateJob(
        task=row.task,
        source=row.source_text.encode(),
        origin="submission",
        filename=f"<submission {submission_id}>",
    )
    return ClaimOutcome.CLAIMED, Claim(
        submission_id,
        row.attempts,
        attempt.id,
        job,
        Campaign.model_validate(row.campaign),
        row.gpu_class,
        now,
        deadline,
    )


def _why_not_claimed(session: Session, submission_id: str, now: datetime) -> ClaimOutcome:
    row = session.execute(
        select(Submission.state, Submission.attempts, Submission.deadline_at).where(Submission.id == submission_id)
    ).one_or_none()
    session.rollback()
    if row is None:
        return ClaimOutcome.MISSING
    if row.state in (State.FINISHED.value, State.ERROR.value):
        return ClaimOutcome.FINAL
    if row.state == State.RUNNING.value and row.deadline_at is not None and row.deadline_at >= now:
        return ClaimOutcome.BUSY
    give_up(session, submission_id, row.attempts, f"gave up after {row.attempts} attempts")
    return ClaimOutcome.EXHAUSTED


def give_up(session: Session, submission_id: str, attempts: int, reason: str) -> bool:
    """End a submission that cannot be run as infra_error (never the candidate's fault, no reward)."""
    now = utcnow()
    result = session.execute(
        update(Submission)
        .where(_claimable(submission_id, now), Submission.attempts == attempts)
        .values(
            state=State.ERROR.value,
            verdict=Verdict.INFRA_ERROR.value,
            reward=None,
            error=reason,
            finished_at=now,
            deadline_at=None,
        )
        .execution_options(synchronize_session=False)
    )
    session.execute(
        update(Attempt)
        .where(Attempt.submission_id == submission_id, Attempt.outcome.is_(None))
        .values(outcome="lost", finished_at=now, error="no result before its deadline")
    )
    session.commit()
    return _rowcount(result) == 1


def renew_lease(session: Session, claim: Claim, lease_s: float) -> bool:
    """Hold the row for another `lease_s` (never past the attempt's own deadline) while this attempt still owns it;
    False if another attempt took it over (this one's result will be discarded as stale)."""
    held_until = min(claim.deadline_at, utcnow() + timedelta(seconds=lease_s))
    result = session.execute(
        update(Submission).where(still_current(claim)).values(deadline_at=held_until)
        .execution_options(synchronize_session=False)
    )
    session.commit()
    return _rowcount(result) == 1


def still_current(claim: Claim) -> Any:
    """SQL condition: the row is still running this claim's attempt."""
    return and_(
        Submission.id == claim.submission_id,
        Submission.state == State.RUNNING.value,
        Submission.attempts == claim.attempt_no,
    )


def end_attempt(session: Session, claim: Claim, outcome: str, error: str | None = None) -> None:
    session.execute(
        update(Attempt).where(Attempt.id == claim.attempt_id).values(outcome=outcome, error=error, finished_at=utcnow())
    )


def release_failed_attempt(session: Session, claim: Claim, error: str, max_attempts: int) -> str:
    """After an attempt produced no usable result: back to the queue, or infra_error when out of attempts.

    Returns "requeued", "gave_up" or "stale" (another attempt already took over).
    """
    now = utcnow()
    exhausted = claim.attempt_no >= max_attempts
    values: dict[str, Any] = (
        {
            "state": State.ERROR.value,
            "verdict": Verdict.INFRA_ERROR.value,
            "reward": None,
            "finished_at": now,
            "error": f"gave up after {claim.attempt_no} attempts; last: {error}"[:4000],
            "deadline_at": None,
        }
        if exhausted
        else {"state": State.QUEUED.value, "enqueued_at": now, "deadline_at": None, "error": error[:4000]}
    )
    result = session.execute(
        update(Submission).where(still_current(claim)).values(**values).execution_options(synchronize_session=False)
    )
    end_attempt(session, claim, "failed" if _rowcount(result) == 1 else "stale", error[:4000])
    session.commit()
    if _rowcount(result) != 1:
        return "stale"
    return "gave_up" if exhausted else "requeued"


def requeue_expired(session: Session, max_attempts: int) -> list[tuple[str, str | None]]:
    """Sweeper: running rows past their deadline go back to the queue (or end as infra_error when out of
    attempts). Returns (id, gpu_class) of the re-queued rows, to be re-dispatched."""
    now = utcnow()
    rows = session.execute(
        select(Submission.id, Submission.attempts, Submission.gpu_class)
        .where(Submission.state == State.RUNNING.value, Submission.deadline_at < now)
        .limit(500)
    ).all()
    session.rollback()
    requeued: list[tuple[str, str | None]] = []
    for sid, attempts, gpu_class in rows:
        if attempts >= max_attempts:
            give_up(session, sid, attempts, f"gave up after {attempts} attempts: the last one passed its deadline")
            continue
        result = session.execute(
            update(Submission)
            .where(
                Submission.id == sid,
                Submission.state == State.RUNNING.value,
                Submission.attempts == attempts,
                Submission.deadline_at < now,
            )
            .values(state=State.QUEUED.value, enqueued_at=now, deadline_at=None)
            .execution_options(synchronize_session=False)
        )
        session.execute(
            update(Attempt)
            .where(Attempt.submission_id == sid, Attempt.attempt_no == attempts, Attempt.outcome.is_(None))
            .values(outcome="lost", finished_at=now, error="no result before its deadline")
        )
        session.commit()
        if _rowcount(result) == 1:
            requeued.append((sid, gpu_class))
    return requeued


def stale_queued(session: Session, older_than_s: float) -> list[tuple[str, datetime, str | None]]:
    """Sweeper: (id, enqueued_at, gpu_class) of rows queued for longer than `older_than_s` without a claim."""
    cutoff = utcnow() - timedelta(seconds=older_than_s)
    rows = session.execute(
        select(Submission.id, Submission.enqueued_at, Submission.gpu_class)
        .where(Submission.state == State.QUEUED.value, Submission.enqueued_at < cutoff)
        .order_by(Submission.enqueued_at)
        .limit(500)
    ).all()
    session.rollback()
    return [(sid, enqueued_at, gpu_class) for sid, enqueued_at, gpu_class in rows if enqueued_at is not None]


def touch_enqueued(session: Session, submission_id: str, enqueued_at: datetime) -> bool:
    """Mark a queued row as re-sent now (CAS on its old enqueue time, so concurrent sweepers send it once)."""
    result = session.execute(
        update(Submission)
        .where(
            Submission.id == submission_id,
            Submission.state == State.QUEUED.value,
            Submission.enqueued_at == enqueued_at,
        )
        .values(enqueued_at=utcnow())
        .execution_options(synchronize_session=False)
    )
    session.commit()
    return _rowcount(result) == 1


def expire_running_of(session: Session, worker_prefix: str) -> int:
    """Mark running rows of workers named `worker_prefix*` as past their deadline (they died with their host
    process, e.g. an embedded service restarted), so the sweeper re-queues them at once."""
    now = utcnow()
    result = session.execute(
        update(Submission)
        .where(
            Submission.state == State.RUNNING.value,
            Submission.worker.startswith(worker_prefix, autoescape=True),
        )
        .values(deadline_at=now - timedelta(seconds=1))
        .execution_options(synchronize_session=False)
    )
    session.commit()
    return _rowcount(result)


def next_queued(session: Session) -> str | None:
    """Oldest queued submission (the embedded worker's queue is the table itself)."""
    sid = session.scalar(
        select(Submission.id)
        .where(Submission.state == State.QUEUED.value)
        .order_by(Submission.created_at, Submission.id)
        .limit(1)
    )
    session.rollback()
    return sid
