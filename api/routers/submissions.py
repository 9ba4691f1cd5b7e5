"""/v1/submissions: submit (one or a batch), poll (with long-polling), list, and fetch reports."""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime
from typing import Annotated, Any

from fastapi import APIRouter, Body, Header, Query, Response
from fastapi.responses import PlainTextResponse
from pydantic import ValidationError
from sqlalchemy.orm import Session
from starlette.concurrency import run_in_threadpool

from api.deps import ClientDep, ServiceDep, SessionDep
from api.intake import submit
from api.problems import (
    GATE_PROBLEMS,
    P_BAD_CURSOR,
    P_BATCH_TOO_LARGE,
    P_CAMPAIGN_LIMITS,
    P_IDEMPOTENCY_REUSED,
    P_INVALID_CAMPAIGN,
    P_MALFORMED_BODY,
    P_NO_REPORT,
    P_NOT_FOUND,
    P_PAYLOAD_TOO_LARGE,
    P_REPORT_NOT_READY,
    P_SOURCE_TOO_LARGE,
    P_UNKNOWN_GPU_CLASS,
    P_UNKNOWN_TASK,
    P_UNSUPPORTED_MEDIA_TYPE,
    P_VALIDATION,
    Problem,
    problem_body,
    problem_responses,
    validation_errors,
)
from api.schemas import (
    BATCH_EXAMPLES,
    SUBMISSION_EXAMPLES,
    BatchItemResult,
    BatchRequest,
    BatchResult,
    SubmissionList,
    SubmissionRequest,
    SubmissionView,
)
from api.views import submission_url, submission_view
from kernelproof_core.store import queries
from kernelproof_core.store.models import FINAL_STATES, Submission

router = APIRouter(prefix="/v1/submissions", tags=["submissions"])
COMMON = (*GATE_PROBLEMS, P_VALIDATION)
SUBMIT_PROBLEMS = (
    *COMMON,
    P_MALFORMED_BODY,
    P_PAYLOAD_TOO_LARGE,
    P_UNSUPPORTED_MEDIA_TYPE,
    P_SOURCE_TOO_LARGE,
    P_UNKNOWN_TASK,
    P_INVALID_CAMPAIGN,
    P_CAMPAIGN_LIMITS,
    P_UNKNOWN_GPU_CLASS,
    P_IDEMPOTENCY_REUSED,
)
IdempotencyKey = Annotated[
    str | None,
    Header(
        alias="Idempotency-Key",
        min_length=1,
        max_length=200,
        pattern=r"^[\x21-\x7e]+$",
        description="a retry with the same key and payload returns the same submission",
    ),
]


def _load(session: Session, submission_id: str) -> Submission:
    row = queries.get_submission(session, submission_id) if submission_id.isalnum() else None
    if row is None:
        raise Problem(P_NOT_FOUND, f"no submission {submission_id!r}")
    return row


@router.post(
    "",
    status_code=202,
    response_model=SubmissionView,
    summary="Submit a candidate",
    responses=problem_responses(*SUBMIT_PROBLEMS),
)
def create_submission(
    body: Annotated[SubmissionRequest, Body(openapi_examples=SUBMISSION_EXAMPLES)],
    response: Response,
    client: ClientDep,
    svc: ServiceDep,
    session: SessionDep,
    idempotency_key: IdempotencyKey = None,
) -> SubmissionView:
    """Store the submission and queue it for a GPU worker. 202 with its id and URL; poll the URL for the
    verdict. An identical earlier candidate may answer at once from its stored verdict (`reused: true`)."""
    result = submit(svc, session, body, client, idempotency_key)
    response.headers["Location"] = submission_url(result.submission.id)
    if not result.created:
        response.headers["Idempotent-Replayed"] = "true"
    return submission_view(result.submission)


@router.post(
    "/batch",
    response_model=BatchResult,
    summary="Submit many candidates",
    responses=problem_responses(*COMMON, P_BATCH_TOO_LARGE, P_MALFORMED_BODY, P_PAYLOAD_TOO_LARGE),
)
def create_batch(
    body: Annotated[BatchRequest, Body(openapi_examples=BATCH_EXAMPLES)],
    client: ClientDep,
    svc: ServiceDep,
    session: SessionDep,
    idempotency_key: IdempotencyKey = None,
) -> BatchResult:
    """Each item is handled like POST /v1/submissions and gets its own result. With an Idempotency-Key header,
    item i uses the key `<key>:<i>`, so retrying the whole batch replays every accepted item."""
    cap = svc.settings.api_max_batch_items
    if len(body.items) > cap:
        raise Problem(P_BATCH_TOO_LARGE, f"{len(body.items)} items; the cap is {cap}")
    results: list[BatchItemResult] = []
    for index, item in enumerate(body.items):
        instance = f"/v1/submissions/batch#items/{index}"
        try:
            req = SubmissionRequest.model_validate(item)
            result = submit(svc, session, req, client, f"{idempotency_key}:{index}" if idempotency_key else None)
            results.append(BatchItemResult(index=index, status=202, submission=submission_view(result.submission)))
        except ValidationError as exc:
            errors = validation_errors(exc.errors())
            detail = "; ".join(f"{'.'.join(e['loc'])}: {e['msg']}" for e in errors[:5])
            problem = problem_body(P_VALIDATION, detail, instance, errors=errors)
            results.append(BatchItemResult(index=index, status=422, problem=problem))
        except Problem as problem:
            results.append(BatchItemResult(index=index, status=problem.ptype.status, problem=problem.body(instance)))
    return BatchResult(results=results)


@router.get(
    "",
    response_model=SubmissionList,
    summary="List submissions",
    responses=problem_responses(*COMMON, P_BAD_CURSOR),
)
def list_submissions(
    caller: ClientDep,
    svc: ServiceDep,
    session: SessionDep,
    task: str | None = None,
    verdict: str | None = None,
    state: str | None = Query(None, pattern="^(queued|running|finished|error)$"),
    client: str | None = Query(None, pattern=r"^(me|\d{1,12})$", description="an API key id, or `me`"),
    tag: str | None = Query(None, max_length=64),
    generator: str | None = None,
    model: str | None = None,
    run_id: str | None = None,
    created_after: datetime | None = None,
    created_before: datetime | None = None,
    limit: int = Query(50, ge=1),
    cursor: str | None = Query(None, max_length=200),
) -> SubmissionList:
    """Newest first, filtered; follow `next_cursor` for the next page."""
    client_id = (caller.key_id if caller else None) if client == "me" else (int(client) if client else None)
    filters = queries.ListFilters(
        task=task,
        verdict=verdict,
        state=state,
        client_id=client_id,
        tag=tag,
        generator=generator,
        model=model,
        run_id=run_id,
        created_after=_aware(created_after),
        created_before=_aware(created_before),
    )
    try:
        rows, next_cursor = queries.list_submissions(
            session, filters, min(limit, svc.settings.api_list_max_limit), cursor
        )
    except queries.BadCursor as exc:
        raise Problem(P_BAD_CURSOR, str(exc)) from None
    return SubmissionList(items=[submission_view(r) for r in rows], next_cursor=next_cursor)


def _aware(value: datetime | None) -> datetime | None:
    if value is None or value.tzinfo is not None:
        return value
    return value.replace(tzinfo=UTC)


@router.get(
    "/{submission_id}",
    response_model=SubmissionView,
    summary="Get a submission (long-poll with ?wait=)",
    responses=problem_responses(*COMMON, P_NOT_FOUND),
)
async def get_submission(
    submission_id: str,
    svc: ServiceDep,
    wait: float | None = Query(
        None, ge=0, le=86400, description="hold the request up to this many seconds until the verdict exists"
    ),
) -> SubmissionView:
    def load() -> Submission:
        with svc.sessions() as session:
            return _load(session, submission_id)

    row = await run_in_threadpool(load)
    if wait:
        deadline = time.monotonic() + min(wait, svc.settings.api_long_poll_max_s)
        while row.state not in FINAL_STATES and time.monotonic() < deadline:
            await asyncio.sleep(min(svc.settings.api_long_poll_interval_s, max(0.0, deadline - time.monotonic())))
            row = await run_in_threadpool(load)
    return submission_view(row)


def _report(session: Session, submission_id: str) -> tuple[Submission, dict[str, Any]]:
    row = _load(session, submission_id)
    if row.state not in FINAL_STATES:
        raise Problem(P_REPORT_NOT_READY, f"submission is {row.state}; poll {submission_url(row.id)}?wait=60")
    body = queries.get_report(session, row)
    if body is None:
        raise Problem(P_NO_REPORT, row.error or "the submission ended without a verification report")
    return row, body


@router.get(
    "/{submission_id}/report",
    summary="The full JSON report",
    responses={
        200: {"description": "the kernelproof.report JSON document (see report.schema.json)"},
        **problem_responses(*COMMON, P_NOT_FOUND, P_REPORT_NOT_READY, P_NO_REPORT),
    },
)
def get_report(submission_id: str, response: Response, session: SessionDep) -> dict[str, Any]:
    row, body = _report(session, submission_id)
    if row.reused_from:
        response.headers["X-KernelProof-Reused-From"] = row.reused_from
    return body


@router.get(
    "/{submission_id}/report.md",
    response_class=PlainTextResponse,
    summary="The Markdown audit report",
    responses={
        200: {"content": {"text/markdown": {}}},
        **problem_responses(*COMMON, P_NOT_FOUND, P_REPORT_NOT_READY, P_NO_REPORT),
    },
)
def get_report_markdown(submission_id: str, session: SessionDep) -> PlainTextResponse:
    from kernelproof_core.report.markdown import render_markdown
    from kernelproof_core.report.models import Report

    _, body = _report(session, submission_id)
    text = render_markdown(Report.model_validate(body))
    return PlainTextResponse(text, media_type="text/markdown; charset=utf-8")
