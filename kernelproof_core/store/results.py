"""Writing a finished verification: the verdict (by compare-and-set) and, in the same transaction, the report,
per-case results with error metrics, timing distributions with raw samples, rewards and the environment."""

from __future__ import annotations

import hashlib
import json
import logging
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from kernelproof_core.report.models import CaseResult, Distribution, Report
from kernelproof_core.report.models import Environment as EnvironmentModel
from kernelproof_core.store.models import (
    Attempt,
    CaseResultRow,
    Environment,
    ReportRow,
    RewardRow,
    State,
    Submission,
    TimingRow,
)
from kernelproof_core.store.transitions import Claim, end_attempt, still_current
from kernelproof_core.store.types import utcnow

log = logging.getLogger(__name__)

_IDENTITY_FIELDS = ("device", "hostname", "platform", "python", "torch", "triton", "cuda", "harness_version")


def report_json(report: Report) -> dict[str, Any]:
    """The report as stored: the exact JSON the pydantic model writes (non-finite floats as strings)."""
    body: dict[str, Any] = json.loads(report.model_dump_json())
    return body


def environment_id(session: Session, env: EnvironmentModel) -> int:
    """Get-or-create the environment row, in its own transaction (a concurrent insert of the same host
    wins)."""
    ident = {k: getattr(env, k) for k in _IDENTITY_FIELDS}
    if env.gpu is not None:
        ident |= {"gpu": env.gpu.name, "capability": env.gpu.capability, "driver": env.gpu.driver}
    fingerprint = hashlib.sha256(json.dumps(ident, sort_keys=True).encode()).hexdigest()
    for _ in range(2):
        existing = session.scalar(select(Environment.id).where(Environment.fingerprint == fingerprint))
        if existing is not None:
            session.rollback()
            return existing
        row = Environment(
            fingerprint=fingerprint,
            device=env.device,
            hostname=env.hostname,
            platform=env.platform,
            python=env.python,
            torch=env.torch,
            triton=env.triton,
            cuda=env.cuda,
            gpu_name=env.gpu.name if env.gpu else None,
            gpu_capability=env.gpu.capability if env.gpu else None,
            driver=env.gpu.driver if env.gpu else None,
            harness_version=env.harness_version,
            detail=json.loads(env.model_dump_json()),
            created_at=utcnow(),
        )
        session.add(row)
        try:
            session.commit()
            return row.id
        except IntegrityError:
            session.rollback()
    raise RuntimeError("could not record the environment")


def finish_with_report(session: Session, claim: Claim, report: Report) -> bool:
    """Record the verdict if this attempt still owns the submission; False (and nothing written) if it
    lost."""
    env_id = environment_id(session, report.environment)
    now = utcnow()
    summary = report.summary
    result = session.execute(
        update(Submission)
        .where(still_current(claim))
        .values(
            state=State.FINISHED.value,
            verdict=summary.verdict.value,
            reward=summary.reward,
            summary=json.loads(summary.model_dump_json()),
            error=None,
            finished_at=now,
            verify_seconds=(now - claim.started_at).total_seconds(),
            environment_id=env_id,
            deadline_at=None,
        )
        .execution_options(synchronize_session=False)
    )
    if int(result.rowcount) != 1:  # type: ignore[attr-defined]
        session.rollback()
        log.warning(
            "submission %s: attempt %d finished after losing its claim; result discarded",
            claim.submission_id,
            claim.attempt_no,
        )
        end_attempt(session, claim, "stale", "finished after another attempt took over")
        session.commit()
        return False
    _insert_results(session, claim, report, env_id)
    end_attempt(session, claim, "finished")
    session.commit()
    return True


def _insert_results(session: Session, claim: Claim, report: Report, env_id: int) -> None:
    sid = claim.submission_id
    session.add(
        ReportRow(
            submission_id=sid,
            attempt_id=claim.attempt_id,
            run_id=report.run_id,
            schema_version=report.schema_version,
            body=report_json(report),
            created_at=utcnow(),
        )
    )
    session.execute(update(Attempt).where(Attempt.id == claim.attempt_id).values(environment_id=env_id))
    rows = [(_case_row(sid, case), case) for case in report.cases]
    session.add_all(row for row, _ in rows)
    session.flush()  # assigns case row ids for the timing and reward rows
    for row, case in rows:
        if case.timing is not None:
            session.add(_timing_row(row.id, case))
        if case.reward is not None:
            r = case.reward
            session.add(
                RewardRow(
                    submission_id=sid,
                    case_result_id=row.id,
                    scope="case",
                    spec=r.spec,
                    value=r.value,
                    speed_score=r.speed_score,
                    instability=r.instability,
                    note=r.note,
                )
            )
    s = report.summary
    if s.reward is not None:
        session.add(
            RewardRow(
                submission_id=sid,
                case_result_id=None,
                scope="run",
                spec=s.reward_spec,
                value=s.reward,
                aggregate_rule=s.aggregate_rule,
                note=s.reward_note,
            )
        )


def _case_row(submission_id: str, case: CaseResult) -> CaseResultRow:
    e = case.error
    return CaseResultRow(
        submission_id=submission_id,
        task=case.task,
        dtype=case.dtype,
        case_id=case.case_id,
        case_kind=case.case_kind,
        dims=dict(case.dims),
        verdict=case.verdict.value,
        failure_message=case.failure.message[:4000] if case.failure else None,
        tolerance=dict(case.tolerance),
        numel=e.numel if e else None,
        max_abs=e.max_abs if e else None,
        max_rel=e.max_rel if e else None,
        mean_abs=e.mean_abs if e else None,
        rmse=e.rmse if e else None,
        rel_l2=e.rel_l2 if e else None,
        cosine=e.cosine if e else None,
        mismatch_count=e.mismatch_count if e else None,
    )


def _stats(prefix: str, d: Distribution) -> dict[str, Any]:
    return {
        f"{prefix}_median_us": d.median,
        f"{prefix}_p95_us": d.p95,
        f"{prefix}_min_us": d.min,
        f"{prefix}_cv": d.cv,
        f"{prefix}_samples_us": list(d.samples),
    }


def _timing_row(case_result_id: int, case: CaseResult) -> TimingRow:
    t = case.timing
    assert t is not None
    return TimingRow(
        case_result_id=case_result_id,
        kind=t.kind,
        warmups=t.warmups,
        samples=t.samples,
        invocations_per_sample=t.invocations_per_sample,
        input_sets=t.input_sets,
        candidate_device_us=t.candidate_device_us,
        baseline_device_us=t.baseline_device_us,
        speedup=t.speedup,
        achieved_bandwidth_gbps=t.achieved_bandwidth_gbps,
        min_bytes=t.min_bytes,
        candidate_launch_inclusive_median_us=t.candidate_launch_inclusive.median
        if t.candidate_launch_inclusive else None,
        baseline_launch_inclusive_median_us=t.baseline_launch_inclusive.median
        if t.baseline_launch_inclusive else None,
        candidate_host_us_per_call=t.candidate_host_us_per_call,
        launch_overhead_us=t.launch_overhead_us,
        **_stats("candidate", t.candidate),
        **_stats("baseline", t.baseline),
    )
