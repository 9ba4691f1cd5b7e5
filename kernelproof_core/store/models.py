"""Tables of the verification service. The report JSON stays the source of truth; the columns here are what
SQL over historical rewards needs (filters, error metrics, timing statistics, reward components).

Changing anything here needs a new Alembic revision in `migrations/versions/` (tests compare the two).
"""

from __future__ import annotations

import enum
from datetime import datetime
from typing import Any, ClassVar

from sqlalchemy import BigInteger, Float, ForeignKey, Index, Integer, MetaData, String, Text, UniqueConstraint
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from kernelproof_core.store.types import JSONType, UTCDateTime

# Deterministic constraint names, so migrations can address them on every backend.
NAMING_CONVENTION = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


class State(enum.StrEnum):
    """Lifecycle of a submission. finished: a verdict came from a verification (or a stored one was reused);
    error: the service gave up (attempts exhausted) and recorded infra_error."""

    QUEUED = "queued"
    RUNNING = "running"
    FINISHED = "finished"
    ERROR = "error"


FINAL_STATES = (State.FINISHED.value, State.ERROR.value)


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING_CONVENTION)
    type_annotation_map: ClassVar[dict[Any, Any]] = {
        datetime: UTCDateTime(),
        dict[str, Any]: JSONType,
        list[Any]: JSONType,
    }


class ApiKey(Base):
    __tablename__ = "api_keys"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(200))
    prefix: Mapped[str] = mapped_column(String(16), index=True, doc="first characters, shown to identify a key")
    key_hash: Mapped[str] = mapped_column(String(64), unique=True, doc="sha256 of the key; the key is never stored")
    rate_limit_per_minute: Mapped[int | None] = mapped_column(Integer)
    created_at: Mapped[datetime]
    revoked_at: Mapped[datetime | None]


class Environment(Base):
    """A host as verification saw it (deduplicated on the fields that identify it; clocks live in the
    report)."""

    __tablename__ = "environments"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    fingerprint: Mapped[str] = mapped_column(String(64), unique=True)
    device: Mapped[str] = mapped_column(String(16))
    hostname: Mapped[str] = mapped_column(String(255))
    platform: Mapped[str] = mapped_column(String(255))
    python: Mapped[str] = mapped_column(String(32))
    torch: Mapped[str] = mapped_column(String(64))
    triton: Mapped[str] = mapped_column(String(64))
    cuda: Mapped[str | None] = mapped_column(String(32))
    gpu_name: Mapped[str | None] = mapped_column(String(128))
    gpu_capability: Mapped[str | None] = mapped_column(String(16))
    driver: Mapped[str | None] = mapped_column(String(64))
    harness_version: Mapped[str] = mapped_column(String(64))
    detail: Mapped[dict[str, Any]]
    created_at: Mapped[datetime]


class Submission(Base):
    __tablename__ = "submissions"
    __table_args__ = (
        Index("ix_submissions_created_at_id", "created_at", "id"),
        Index("ix_submissions_task_created_at", "task", "created_at"),
        Index("ix_submissions_verdict_created_at", "verdict", "created_at"),
        Index("ix_submissions_client_id_created_at", "client_id", "created_at"),
        Index("ix_submissions_state_enqueued_at", "state", "enqueued_at"),
        Index("ix_submissions_state_deadline_at", "state", "deadline_at"),
        Index("ix_submissions_cache_key_state", "cache_key", "state"),
    )

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    client_id: Mapped[int | None] = mapped_column(ForeignKey("api_keys.id"))
    idempotency_scope: Mapped[str | None] = mapped_column(String(300), unique=True, doc="<client>:<Idempotency-Key>")
    request_sha256: Mapped[str] = mapped_column(String(64), doc="hash of the canonical request payload")
    task: Mapped[str] = mapped_column(String(64))
    source_text: Mapped[str] = mapped_column(Text)
    source_sha256: Mapped[str] = mapped_column(String(64), index=True)
    dtypes: Mapped[list[Any]]
    campaign_preset: Mapped[str | None] = mapped_column(String(32))
    campaign: Mapped[dict[str, Any]] = mapped_column(doc="the resolved Campaign, as the worker runs it")
    gpu_class: Mapped[str | None] = mapped_column(String(32), doc="requested GPU class (queue routing)")
    meta: Mapped[dict[str, Any]] = mapped_column("metadata", JSONType)
    generator: Mapped[str | None] = mapped_column(String(200), index=True)
    model: Mapped[str | None] = mapped_column(String(200), index=True)
    run_id: Mapped[str | None] = mapped_column(String(200), index=True)
    cache_key: Mapped[str] = mapped_column(String(64), doc="what must match for a stored verdict to be reused")
    state: Mapped[str] = mapped_column(String(16))
    verdict: Mapped[str | None] = mapped_column(String(32))
    reward: Mapped[float | None] = mapped_column(Float)
    summary: Mapped[dict[str, Any] | None] = mapped_column(JSONType)
    error: Mapped[str | None] = mapped_column(Text)
    reused_from: Mapped[str | None] = mapped_column(ForeignKey("submissions.id"))
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    worker: Mapped[str | None] = mapped_column(String(200))
    worker_gpu_class: Mapped[str | None] = mapped_column(String(32), doc="GPU class of the worker that ran it")
    environment_id: Mapped[int | None] = mapped_column(ForeignKey("environments.id"))
    verify_seconds: Mapped[float | None] = mapped_column(Float, doc="duration of the attempt that gave the verdict")
    created_at: Mapped[datetime]
    enqueued_at: Mapped[datetime | None]
    started_at: Mapped[datetime | None]
    deadline_at: Mapped[datetime | None]
    finished_at: Mapped[datetime | None]


class SubmissionTag(Base):
    """metadata.tags, one row per tag so the list filter can use an index on every backend."""

    __tablename__ = "submission_tags"

    submission_id: Mapped[str] = mapped_column(ForeignKey("submissions.id", ondelete="CASCADE"), primary_key=True)
    tag: Mapped[str] = mapped_column(String(64), primary_key=True, index=True)


class Attempt(Base):
    """One claim of a submission by a worker. outcome: finished, failed (the job process died), lost (swept
    after its deadline) or stale (finished after another attempt had taken over; discarded)."""

    __tablename__ = "attempts"
    __table_args__ = (UniqueConstraint("submission_id", "attempt_no"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    submission_id: Mapped[str] = mapped_column(ForeignKey("submissions.id", ondelete="CASCADE"), index=True)
    attempt_no: Mapped[int] = mapped_column(Integer)
    worker: Mapped[str] = mapped_column(String(200))
    gpu_class: Mapped[str | None] = mapped_column(String(32))
    started_at: Mapped[datetime]
    finished_at: Mapped[datetime | None]
    outcome: Mapped[str | None] = mapped_column(String(16))
    error: Mapped[str | None] = mapped_column(Text)
    environment_id: Mapped[int | None] = mapped_column(ForeignKey("environments.id"))


class ReportRow(Base):
    __tablename__ = "reports"

    submission_id: Mapped[str] = mapped_column(ForeignKey("submissions.id", ondelete="CASCADE"), primary_key=True)
    attempt_id: Mapped[int] = mapped_column(ForeignKey("attempts.id"))
    run_id: Mapped[str] = mapped_column(String(64))
    schema_version: Mapped[str] = mapped_column(String(16))
    body: Mapped[dict[str, Any]] = mapped_column(doc="the full JSON report (source of truth)")
    created_at: Mapped[datetime]


class CaseResultRow(Base):
    __tablename__ = "case_results"
    __table_args__ = (
        UniqueConstraint("submission_id", "dtype", "case_id"),
        Index("ix_case_results_task_dtype_verdict", "task", "dtype", "verdict"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    submission_id: Mapped[str] = mapped_column(ForeignKey("submissions.id", ondelete="CASCADE"))
    task: Mapped[str] = mapped_column(String(64))
    dtype: Mapped[str] = mapped_column(String(16))
    case_id: Mapped[str] = mapped_column(String(64))
    case_kind: Mapped[str] = mapped_column(String(16))
    dims: Mapped[dict[str, Any]]
    verdict: Mapped[str] = mapped_column(String(32))
    failure_message: Mapped[str | None] = mapped_column(Text)
    tolerance: Mapped[dict[str, Any]]
    numel: Mapped[int | None] = mapped_column(BigInteger)
    max_abs: Mapped[float | None] = mapped_column(Float)
    max_rel: Mapped[float | None] = mapped_column(Float)
    mean_abs: Mapped[float | None] = mapped_column(Float)
    rmse: Mapped[float | None] = mapped_column(Float)
    rel_l2: Mapped[float | None] = mapped_column(Float)
    cosine: Mapped[float | None] = mapped_column(Float)
    mismatch_count: Mapped[int | None] = mapped_column(BigInteger)


class TimingRow(Base):
    """Timing distribution of one case: summary statistics as columns, raw per-invocation samples as JSON."""

    __tablename__ = "timings"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    case_result_id: Mapped[int] = mapped_column(ForeignKey("case_results.id", ondelete="CASCADE"), unique=True)
    kind: Mapped[str] = mapped_column(String(32))
    warmups: Mapped[int] = mapped_column(Integer)
    samples: Mapped[int] = mapped_column(Integer)
    invocations_per_sample: Mapped[int] = mapped_column(Integer)
    input_sets: Mapped[int] = mapped_column(Integer)
    candidate_median_us: Mapped[float] = mapped_column(Float)
    candidate_p95_us: Mapped[float] = mapped_column(Float)
    candidate_min_us: Mapped[float] = mapped_column(Float)
    candidate_cv: Mapped[float] = mapped_column(Float)
    baseline_median_us: Mapped[float] = mapped_column(Float)
    baseline_p95_us: Mapped[float] = mapped_column(Float)
    baseline_min_us: Mapped[float] = mapped_column(Float)
    baseline_cv: Mapped[float] = mapped_column(Float)
    candidate_samples_us: Mapped[list[Any]]
    baseline_samples_us: Mapped[list[Any]]
    candidate_device_us: Mapped[float | None] = mapped_column(Float)
    baseline_device_us: Mapped[float | None] = mapped_column(Float)
    speedup: Mapped[float] = mapped_column(Float)
    achieved_bandwidth_gbps: Mapped[float | None] = mapped_column(Float)
    min_bytes: Mapped[int] = mapped_column(BigInteger)
    # Harness 0.4 (migration 0003): the medians above are device time with launches hidden; these are reported.
    candidate_launch_inclusive_median_us: Mapped[float | None] = mapped_column(Float)
    baseline_launch_inclusive_median_us: Mapped[float | None] = mapped_column(Float)
    candidate_host_us_per_call: Mapped[float | None] = mapped_column(Float)
    launch_overhead_us: Mapped[float | None] = mapped_column(Float)


class RewardRow(Base):
    """A reward with its components and spec id: scope `case` (one per case) or `run` (the aggregate)."""

    __tablename__ = "rewards"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    submission_id: Mapped[str] = mapped_column(ForeignKey("submissions.id", ondelete="CASCADE"), index=True)
    case_result_id: Mapped[int | None] = mapped_column(ForeignKey("case_results.id", ondelete="CASCADE"), index=True)
    scope: Mapped[str] = mapped_column(String(8))
    spec: Mapped[str] = mapped_column(String(64))
    value: Mapped[float] = mapped_column(Float)
    speed_score: Mapped[float | None] = mapped_column(Float)
    instability: Mapped[float | None] = mapped_column(Float)
    aggregate_rule: Mapped[str | None] = mapped_column(String(200))
    note: Mapped[str | None] = mapped_column(Text)
