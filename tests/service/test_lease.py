"""Leases: an attempt may run for `job_deadline_s`, but holds its row for `job_lease_s` at a time, renewed while it
runs. A long honest attempt keeps its claim through sweeper passes; an attempt whose worker stopped renewing is
re-queued after one lease; a renewal never outlives the attempt's own deadline and fails once another took over."""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime, timedelta

from sqlalchemy import select, text
from sqlalchemy.orm import Session, sessionmaker

from kernelproof_core.campaign import Campaign
from kernelproof_core.settings import Settings
from kernelproof_core.store import transitions
from kernelproof_core.store.models import Submission
from kernelproof_core.store.submissions import NewSubmission, create_submission
from kernelproof_core.store.transitions import Claim, ClaimOutcome
from kernelproof_core.store.types import utcnow
from tests.service.candidates import GOOD
from worker.execution import process_submission
from worker.job_host import JobHost

ONE_CASE = Campaign(device="interpreter", dtypes=["bfloat16"], case_set="interpreter", case_ids=["n1"], measure=False)
SLOW_FIRST_CALL = GOOD + """

import time

_calls = [0]


def candidate(x, weight, eps):
    _calls[0] += 1
    if _calls[0] == 1:
        time.sleep(3.0)  # three leases of 1 s: honest, only slow
    return rms_norm(x, weight, eps)
"""


def submit(db: sessionmaker[Session], source: str = GOOD) -> str:
    with db() as session:
        return create_submission(session, NewSubmission(
            task="rms_norm", source_text=source, campaign=ONE_CASE, campaign_preset=None, gpu_class=None,
            metadata={}, client_id=None, request_sha256="0" * 64), reuse_verdicts=False).submission.id


def take(db: sessionmaker[Session], sid: str, deadline_s: float, lease_s: float) -> Claim:
    with db() as session:
        outcome, claim = transitions.claim(session, sid, worker="w", gpu_class=None, deadline_s=deadline_s,
                                           max_attempts=3, lease_s=lease_s)
    assert outcome is ClaimOutcome.CLAIMED and claim is not None
    return claim


def held_until(db: sessionmaker[Session], sid: str) -> datetime:
    """The row's deadline_at, in UTC (SQLite stores it naive)."""
    with db() as session:
        value = session.scalar(select(Submission.deadline_at).where(Submission.id == sid))
    assert value is not None
    return value if value.tzinfo else value.replace(tzinfo=UTC)


def test_a_lease_holds_the_row_briefly_renews_and_lapses(db: sessionmaker[Session]) -> None:
    sid = submit(db)
    claim = take(db, sid, deadline_s=600, lease_s=1.0)
    first = held_until(db, sid)
    assert claim.deadline_at - claim.started_at == timedelta(seconds=600)  # what the job host enforces
    assert first <= claim.started_at + timedelta(seconds=1)
    time.sleep(0.3)
    with db() as session:
        assert transitions.renew_lease(session, claim, 1.0)
    assert held_until(db, sid) > first
    time.sleep(1.2)  # no renewal: the lease lapses and the sweeper takes the job back
    with db() as session:
        assert transitions.requeue_expired(session, max_attempts=3) == [(sid, None)]
        assert not transitions.renew_lease(session, claim, 1.0)  # too late: the row is not this attempt's any more
    again = take(db, sid, deadline_s=600, lease_s=1.0)
    assert again.attempt_no == 2


def test_a_renewal_never_outlives_the_attempts_deadline(db: sessionmaker[Session]) -> None:
    sid = submit(db)
    claim = take(db, sid, deadline_s=2.0, lease_s=60.0)
    with db() as session:
        assert transitions.renew_lease(session, claim, 60.0)
    assert held_until(db, sid) <= claim.deadline_at


def test_a_long_attempt_keeps_its_claim_through_sweeper_passes(db: sessionmaker[Session], settings: Settings) -> None:
    """A first call of 3 s against 1 s leases while a sweeper pass runs every 0.2 s: the worker's lease keeper
    renews, nothing is re-queued, one attempt writes the verdict."""
    sid = submit(db, SLOW_FIRST_CALL)
    stop, requeued = threading.Event(), []

    def sweeper() -> None:
        while not stop.wait(0.2):
            with db() as session:
                requeued.extend(transitions.requeue_expired(session, max_attempts=3))

    sweeping = threading.Thread(target=sweeper)
    sweeping.start()
    host = JobHost(persistent=False)
    try:
        short = settings.model_copy(update={"job_lease_s": 1.0, "job_deadline_s": 120.0})
        started = utcnow()
        status = process_submission(db, short, sid, "lease-test", lambda *_: None, host)
    finally:
        stop.set()
        sweeping.join()
        host.close()
    assert (utcnow() - started).total_seconds() > 3.0  # it did outlast three leases
    assert status == "pass" and requeued == []
    with db() as session:
        outcomes = session.execute(text("SELECT outcome FROM attempts WHERE submission_id = :s"), {"s": sid})
        assert [r[0] for r in outcomes] == ["finished"]
