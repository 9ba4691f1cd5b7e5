"""Turning a validated request into a stored, dispatched submission: task, source cap, campaign within the
operator's limits, GPU class, idempotency, reuse of stored verdicts."""

from __future__ import annotations

import json

from pydantic import ValidationError
from sqlalchemy.orm import Session

from api.problems import (
    P_CAMPAIGN_LIMITS,
    P_IDEMPOTENCY_REUSED,
    P_INVALID_CAMPAIGN,
    P_SOURCE_TOO_LARGE,
    P_UNKNOWN_GPU_CLASS,
    P_UNKNOWN_TASK,
    P_VALIDATION,
    Problem,
)
from api.schemas import CampaignSpec, SubmissionRequest
from api.service import ClientIdentity, ServiceState
from kernelproof_core.campaign import Campaign
from kernelproof_core.errors import UsageError
from kernelproof_core.presets import build_campaign
from kernelproof_core.store.submissions import (
    CreateResult,
    IdempotencyConflict,
    NewSubmission,
    canonical_sha256,
    create_submission,
)
from kernelproof_core.tasks import get_task


def resolve_campaign(svc: ServiceState, req: SubmissionRequest) -> tuple[str, Campaign]:
    settings = svc.settings
    spec = CampaignSpec(preset=req.campaign) if isinstance(req.campaign, str) else req.campaign
    overrides = spec.model_dump(exclude_unset=True, exclude={"preset"}, exclude_none=True)
    limits = {
        "warmups": settings.api_max_warmups,
        "samples": settings.api_max_samples,
        "invocations_per_sample": settings.api_max_invocations_per_sample,
    }
    over = [f"{k}={overrides[k]} (max {cap})" for k, cap in limits.items() if overrides.get(k, 0) > cap]
    if spec.stopping is not None:
        stop = spec.stopping
        if stop.max_measure_s > settings.api_max_measure_s_per_case:
            over.append(f"stopping.max_measure_s={stop.max_measure_s} (max {settings.api_max_measure_s_per_case})")
        if stop.target_rse < settings.api_min_target_rse:
            over.append(f"stopping.target_rse={stop.target_rse} (min {settings.api_min_target_rse})")
        if stop.max_samples > settings.api_max_samples:
            if "max_samples" in stop.model_fields_set:
                over.append(f"stopping.max_samples={stop.max_samples} (max {settings.api_max_samples})")
            else:  # the rule's default is above this operator's cap: the cap is the client's default here
                stop = stop.model_copy(update={"max_samples": max(stop.min_samples, settings.api_max_samples)})
        overrides["stopping"] = stop
    if over:
        raise Problem(P_CAMPAIGN_LIMITS, "; ".join(over))
    try:
        task = get_task(req.task)
    except UsageError as exc:
        raise Problem(P_UNKNOWN_TASK, str(exc)) from None
    try:
        campaign = build_campaign(task, svc.device, spec.preset, req.dtypes, overrides)
    except (ValueError, ValidationError) as exc:
        raise Problem(P_INVALID_CAMPAIGN, str(exc)[:1000]) from None
    for name, cap in limits.items():  # presets themselves must respect the operator's limits too
        if getattr(campaign, name) > cap:
            raise Problem(
                P_CAMPAIGN_LIMITS,
                f"preset {spec.preset!r} sets {name}={getattr(campaign, name)}; the operator's limit is {cap}",
            )
    return spec.preset, campaign


def to_new_submission(
    svc: ServiceState, req: SubmissionRequest, client: ClientIdentity | None, idempotency_key: str | None
) -> NewSubmission:
    settings = svc.settings
    size = len(req.source.encode("utf-8"))
    if size > settings.candidate_max_source_bytes:
        raise Problem(P_SOURCE_TOO_LARGE, f"source is {size} bytes; the cap is {settings.candidate_max_source_bytes}")
    meta = req.metadata.model_dump(mode="json", exclude_unset=True)
    meta_size = len(json.dumps(meta, ensure_ascii=False).encode("utf-8"))
    if meta_size > settings.api_max_metadata_bytes:
        raise Problem(P_VALIDATION, f"metadata is {meta_size} bytes; the cap is {settings.api_max_metadata_bytes}")
    if req.gpu_class is not None and settings.gpu_classes and req.gpu_class not in settings.gpu_classes:
        raise Problem(P_UNKNOWN_GPU_CLASS, f"known GPU classes: {', '.join(settings.gpu_classes)}")
    preset, campaign = resolve_campaign(svc, req)
    return NewSubmission(
        task=req.task,
        source_text=req.source,
        campaign=campaign,
        campaign_preset=preset,
        gpu_class=req.gpu_class,
        metadata=meta,
        client_id=client.key_id if client else None,
        request_sha256=canonical_sha256(req.model_dump(mode="json")),
        idempotency_key=idempotency_key,
        tags=list(req.metadata.tags),
    )


def submit(
    svc: ServiceState,
    session: Session,
    req: SubmissionRequest,
    client: ClientIdentity | None,
    idempotency_key: str | None,
) -> CreateResult:
    """Store (committed) and then dispatch; a replay or a reused verdict is not dispatched again."""
    new = to_new_submission(svc, req, client, idempotency_key)
    try:
        result = create_submission(session, new, reuse_verdicts=svc.settings.reuse_verdicts)
    except IdempotencyConflict as exc:
        raise Problem(P_IDEMPOTENCY_REUSED, str(exc), submission_id=exc.existing_id) from None
    if result.needs_dispatch:
        svc.dispatcher.dispatch(result.submission.id, result.submission.gpu_class)
    outcome = "replayed" if not result.created else ("reused" if result.reused else "created")
    svc.metrics.submissions.labels(outcome).inc()
    return result
