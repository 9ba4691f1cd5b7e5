"""Database rows to API responses."""

from __future__ import annotations

from api.schemas import SubmissionView
from kernelproof_core.store.models import FINAL_STATES, Submission


def submission_url(submission_id: str) -> str:
    return f"/v1/submissions/{submission_id}"


def submission_view(row: Submission) -> SubmissionView:
    url = submission_url(row.id)
    has_report = row.state in FINAL_STATES and (row.reused_from is not None or row.environment_id is not None)
    return SubmissionView(
        id=row.id,
        url=url,
        state=row.state,
        task=row.task,
        dtypes=list(row.dtypes),
        campaign_preset=row.campaign_preset,
        campaign=row.campaign,
        gpu_class=row.gpu_class,
        metadata=row.meta,
        source_sha256=row.source_sha256,
        verdict=row.verdict,
        reward=row.reward,
        summary=row.summary,
        reused=row.reused_from is not None,
        reused_from=row.reused_from,
        attempts=row.attempts,
        error=row.error,
        created_at=row.created_at,
        started_at=row.started_at,
        finished_at=row.finished_at,
        report_url=f"{url}/report" if has_report else None,
        report_markdown_url=f"{url}/report.md" if has_report else None,
    )
