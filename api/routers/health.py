"""/healthz (the process is up), /readyz (database and broker reachable) and /metrics (Prometheus)."""

from __future__ import annotations

from fastapi import APIRouter, Response
from fastapi.responses import JSONResponse
from prometheus_client import CONTENT_TYPE_LATEST
from sqlalchemy import text

from api.deps import ServiceDep
from api.problems import P_DATABASE_UNAVAILABLE, P_NOT_READY, problem_response, problem_responses
from api.schemas import Health

router = APIRouter(tags=["operations"])


@router.get("/healthz", response_model=Health, summary="Liveness")
def healthz() -> Health:
    return Health()


@router.get(
    "/readyz",
    response_model=Health,
    summary="Readiness: database and broker reachable",
    responses=problem_responses(P_NOT_READY),
)
def readyz(svc: ServiceDep) -> Health | JSONResponse:
    checks: dict[str, str] = {}
    try:
        with svc.sessions() as session:
            session.execute(text("SELECT 1"))
        checks["database"] = "ok"
    except Exception as exc:
        checks["database"] = f"unreachable: {type(exc).__name__}"
    checks["broker"] = "ok" if svc.dispatcher.ping() else "unreachable"
    if any(v != "ok" for v in checks.values()):
        return problem_response(
            P_NOT_READY, ", ".join(f"{k}: {v}" for k, v in checks.items()), "/readyz", checks=checks
        )
    return Health(checks=checks)


@router.get(
    "/metrics",
    summary="Prometheus metrics",
    response_class=Response,
    responses={200: {"content": {CONTENT_TYPE_LATEST: {}}}, **problem_responses(P_DATABASE_UNAVAILABLE)},
)
def metrics(svc: ServiceDep) -> Response:
    return Response(svc.metrics.render(), media_type=CONTENT_TYPE_LATEST)
