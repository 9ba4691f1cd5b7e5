"""Creating submissions: idempotency keys, answering identical candidates from stored verdicts, tags.

The row is committed here, before any queue message is sent (the caller dispatches afterwards); a lost message
is the sweeper's business, never a lost submission.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from kernelproof_core import HARNESS_VERSION
from kernelproof_core.campaign import Campaign
from kernelproof_core.store.models import State, Submission, SubmissionTag
from kernelproof_core.store.types import utcnow
from kernelproof_core.verdicts import Verdict

# Verdicts never reused: they say nothing about the candidate, so a resubmission deserves a fresh run.
NOT_REUSABLE = (Verdict.INFRA_ERROR.value, Verdict.SKIPPED.value)


class IdempotencyConflict(Exception):
    """The Idempotency-Key was already used with a different payload."""

    def __init__(self, existing_id: str) -> None:
        super().__init__(f"Idempotency-Key already used for submission {existing_id} with a different payload")
        self.existing_id = existing_id


@dataclass
class NewSubmission:
    task: str
    source_text: str
    campaign: Campaign
    campaign_preset: str | None
    gpu_class: str | None
    metadata: dict[str, Any]
    client_id: int | None
    request_sha256: str
    idempotency_key: str | None = None
    tags: list[str] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class CreateResult:
    submission: Submission
    created: bool  # False: an idempotent replay of an earlier request
    reused: bool  # answered from a stored verdict; nothing to enqueue

    @property
    def needs_dispatch(self) -> bool:
        return self.created and self.submission.state == State.QUEUED.value


def canonical_sha256(payload: Any) -> str:
    """Hash of a JSON-able payload independent of key order and whitespace."""
    text = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def source_sha256(source_text: str) -> str:
    return hashlib.sha256(source_text.encode()).hexdigest()


def cache_key(task: str, source_hash: str, campaign: Campaign, gpu_class: str | None) -> str:
    """What must match for a stored verdict to answer a new submission (dtypes are part of the campaign)."""
    return canonical_sha256(
        {
            "task": task,
            "source_sha256": source_hash,
            "campaign": campaign.public_dump(),
            "gpu_class": gpu_class,
            "harness_version": HARNESS_VERSION,
        }
    )


def idempotency_scope(client_id: int | None, key: str) -> str:
    return f"{client_id if client_id is not None else 'anonymous'}:{key}"


def _replay(session: Session, scope: str, request_sha256: str) -> Submission | None:
    existing = session.scalar(select(Submission).where(Submission.idempotency_scope == scope))
    if existing is not None and existing.request_sha256 != request_sha256:
        raise IdempotencyConflict(existing.id)
    return existing


def find_reusable(session: Session, key: str) -> Submission | None:
    """The latest original (not itself reused) finished submission with this cache key and a reusable
    verdict."""
    return session.scalar(
        select(Submission)
        .where(
            Submission.cache_key == key,
            Submission.state == State.FINISHED.value,
            Submission.reused_from.is_(None),
            Submission.verdict.is_not(None),
            Submission.verdict.not_in(NOT_REUSABLE),
        )
        .order_by(Submission.finished_at.desc())
        .limit(1)
    )


def create_submission(session: Session, new: NewSubmission, *, reuse_verdicts: bool) -> CreateResult:
    """Insert a submission (queued, or finished from a stored verdict) and commit; replay idempotent
    retries."""
    scope = idempotency_scope(new.client_id, new.idempotency_key) if new.idempotency_key else None
    if scope is not None:
        existing = _replay(session, scope, new.request_sha256)
        if existing is not None:
            return CreateResult(existing, created=False, reused=existing.reused_from is not None)
    now = utcnow()
    src_hash = source_sha256(new.source_text)
    key = cache_key(new.task, src_hash, new.campaign, new.gpu_class)
    meta = new.metadata
    row = Submission(
        id=uuid.uuid4().hex,
        client_id=new.client_id,
        idempotency_scope=scope,
        request_sha256=new.request_sha256,
        task=new.task,
        source_text=new.source_text,
        source_sha256=src_hash,
        dtypes=list(new.campaign.dtypes),
        campaign_preset=new.campaign_preset,
        campaign=new.campaign.public_dump(),
        gpu_class=new.gpu_class,
        meta=meta,
        generator=meta.get("generator"),
        model=meta.get("model"),
        run_id=meta.get("run_id"),
        cache_key=key,
        state=State.QUEUED.value,
        attempts=0,
        created_at=now,
        enqueued_at=now,
    )
    original = find_reusable(session, key) if reuse_verdicts else None
    if original is not None:
        row.state = State.FINISHED.value
        row.verdict, row.reward, row.summary = original.verdict, original.reward, original.summary
        row.reused_from, row.environment_id = original.id, original.environment_id
        row.enqueued_at, row.finished_at = None, now
    session.add(row)
    session.add_all(SubmissionTag(submission_id=row.id, tag=t) for t in dict.fromkeys(new.tags))
    try:
        session.commit()
    except IntegrityError:
        # A concurrent request with the same Idempotency-Key committed first: answer as its replay.
        session.rollback()
        if scope is None:
            raise
        existing = _replay(session, scope, new.request_sha256)
        if existing is None:
            raise
        return CreateResult(existing, created=False, reused=existing.reused_from is not None)
    return CreateResult(row, created=True, reused=original is not None)
