"""Read-side queries: one submission, its report, filtered lists with cursor pagination, the leaderboard (from
the SQL view, so API and SQL users see the same ranking) and the numbers /metrics exports."""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Float, Integer, String, and_, case, column, func, or_, select, table
from sqlalchemy.orm import Session

from kernelproof_core.reward import CURRENT_REWARD
from kernelproof_core.store.models import FINAL_STATES, ReportRow, Submission, SubmissionTag
from kernelproof_core.store.types import UTCDateTime


class BadCursor(ValueError):
    """The pagination cursor was not produced by this service."""


@dataclass(frozen=True, slots=True)
class ListFilters:
    task: str | None = None
    verdict: str | None = None
    state: str | None = None
    client_id: int | None = None
    tag: str | None = None
    generator: str | None = None
    model: str | None = None
    run_id: str | None = None
    created_after: datetime | None = None
    created_before: datetime | None = None


def get_submission(session: Session, submission_id: str) -> Submission | None:
    return session.get(Submission, submission_id)


def get_report(session: Session, submission: Submission) -> dict[str, Any] | None:
    """The JSON report; a reused answer shows the report of the run it was answered from."""
    source_id = submission.reused_from or submission.id
    row = session.get(ReportRow, source_id)
    return row.body if row is not None else None


def encode_cursor(created_at: datetime, submission_id: str) -> str:
    return base64.urlsafe_b64encode(f"{created_at.isoformat()}|{submission_id}".encode()).decode().rstrip("=")


def decode_cursor(cursor: str) -> tuple[datetime, str]:
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
        stamp, sid = raw.split("|", 1)
        created = datetime.fromisoformat(stamp)
    except (ValueError, UnicodeDecodeError, binascii.Error) as exc:
        raise BadCursor("malformed cursor") from exc
    if created.tzinfo is None or not sid.isalnum() or len(sid) > 32:
        raise BadCursor("malformed cursor")
    return created, sid


def list_submissions(
    session: Session, filters: ListFilters, limit: int, cursor: str | None = None
) -> tuple[list[Submission], str | None]:
    """Newest first; returns the page and the cursor of the next page (None at the end)."""
    stmt = select(Submission)
    conds: list[Any] = []
    f = filters
    for col, value in (
        (Submission.task, f.task),
        (Submission.verdict, f.verdict),
        (Submission.state, f.state),
        (Submission.client_id, f.client_id),
        (Submission.generator, f.generator),
        (Submission.model, f.model),
        (Submission.run_id, f.run_id),
    ):
        if value is not None:
            conds.append(col == value)
    if f.created_after is not None:
        conds.append(Submission.created_at >= f.created_after)
    if f.created_before is not None:
        conds.append(Submission.created_at < f.created_before)
    if f.tag is not None:
        stmt = stmt.join(SubmissionTag, SubmissionTag.submission_id == Submission.id)
        conds.append(SubmissionTag.tag == f.tag)
    if cursor is not None:
        created, sid = decode_cursor(cursor)
        conds.append(or_(Submission.created_at < created, and_(Submission.created_at == created, Submission.id < sid)))
    rows = list(
        session.scalars(
            stmt.where(*conds).order_by(Submission.created_at.desc(), Submission.id.desc()).limit(limit + 1)
        )
    )
    next_cursor = encode_cursor(rows[limit - 1].created_at, rows[limit - 1].id) if len(rows) > limit else None
    return rows[:limit], next_cursor


DTYPE_SCORES = table(
    "v_submission_dtype_scores",
    column("submission_id", String),
    column("task", String),
    column("dtype", String),
    column("gpu_class", String),
    column("source_sha256", String),
    column("generator", String),
    column("model", String),
    column("finished_at", UTCDateTime()),
    column("cases_total", Integer),
    column("cases_passed", Integer),
    column("cases_rewarded", Integer),
    column("mean_reward", Float),
    column("reward_spec", String),
)


def leaderboard(
    session: Session, task: str | None, dtype: str | None, gpu_class: str | None, limit: int,
    reward_spec: str = CURRENT_REWARD,
) -> list[dict[str, Any]]:
    """Best passing candidates by mean case reward under one reward spec (rewards of different specs are not
    comparable), one entry per (source, dtype); unrewarded passes (interpreter runs) rank after every rewarded one."""
    v = DTYPE_SCORES.c
    conds: list[Any] = [v.cases_passed == v.cases_total, or_(v.reward_spec == reward_spec, v.reward_spec.is_(None))]
    if task is not None:
        conds.append(v.task == task)
    if dtype is not None:
        conds.append(v.dtype == dtype)
    if gpu_class is not None:
        conds.append(v.gpu_class == gpu_class)
    rows = (
        session.execute(
            select(DTYPE_SCORES)
            .where(*conds)
            .order_by(v.mean_reward.desc().nulls_last(), v.finished_at.asc())
            .limit(limit * 4)
        )
        .mappings()
        .all()
    )
    seen: set[tuple[str, str, str]] = set()
    entries: list[dict[str, Any]] = []
    for row in rows:
        key = (row["task"], row["source_sha256"], row["dtype"])
        if key in seen:
            continue
        seen.add(key)
        entries.append(dict(row))
        if len(entries) == limit:
            break
    return entries


def state_counts(session: Session) -> dict[str, int]:
    rows = session.execute(select(Submission.state, func.count()).group_by(Submission.state)).all()
    return {state: int(n) for state, n in rows}


def verdict_counts(session: Session) -> dict[tuple[str, str], int]:
    rows = session.execute(
        select(Submission.task, Submission.verdict, func.count())
        .where(Submission.state.in_(FINAL_STATES))
        .group_by(Submission.task, Submission.verdict)
    ).all()
    return {(task, verdict or "none"): int(n) for task, verdict, n in rows}


def latency_histogram(session: Session, buckets: list[float]) -> tuple[list[int], int, float]:
    """Cumulative counts of verification durations per bucket, the total count and the sum (Prometheus
    histogram semantics, computed from the table so every API replica reports the same numbers)."""
    cols = [func.sum(case((Submission.verify_seconds <= b, 1), else_=0)) for b in buckets]
    row = session.execute(
        select(func.count(), func.coalesce(func.sum(Submission.verify_seconds), 0.0), *cols).where(
            Submission.verify_seconds.is_not(None)
        )
    ).one()
    return [int(c or 0) for c in row[2:]], int(row[0]), float(row[1])
