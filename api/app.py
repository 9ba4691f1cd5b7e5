"""The FastAPI application factory.

Production: `uvicorn --factory api.app:create_app` (settings from KERNELPROOF_* variables, Celery dispatch).
Embedded: `kernelproof serve` builds the same app with queue_backend=embedded, which also starts the
in-process worker thread. Either way the API process only stores, dispatches and reads; it never runs
candidate code.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI

from api.gate import GateMiddleware
from api.problems import install_problem_handlers
from api.routers import health, leaderboard, submissions, tasks
from api.service import ServiceState, build_service
from kernelproof_core import __version__
from kernelproof_core.settings import Settings, get_settings
from worker.dispatch import Dispatcher

log = logging.getLogger(__name__)

DESCRIPTION = """\
Verify untrusted, AI-written Triton kernels: submit a candidate, poll for its verdict, read its report.

Every error is an RFC 9457 `application/problem+json` document with a stable `type`
(`urn:kernelproof:problem:<slug>`; see docs/API.md). Authenticate with `Authorization: Bearer <key>`
(or `X-API-Key`); keys are created with `kernelproof keys create`.
"""

TAGS = [
    {"name": "submissions", "description": "Submit candidates, poll verdicts, fetch reports."},
    {"name": "tasks", "description": "What can be verified, and how strictly."},
    {"name": "leaderboard", "description": "Best passing candidates by reward."},
    {"name": "operations", "description": "Health, readiness and Prometheus metrics (no key needed)."},
]


def create_app(
    settings: Settings | None = None,
    *,
    dispatcher: Dispatcher | None = None,
    start_embedded_worker: bool = True,
) -> FastAPI:
    settings = settings or get_settings()
    svc: ServiceState = build_service(settings, dispatcher, start_embedded_worker)

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        if svc.embedded_worker is not None:
            svc.embedded_worker.start()
            log.info("embedded worker started (device %s, sandbox %s)", svc.device, settings.sandbox_enabled)
        try:
            yield
        finally:
            if svc.embedded_worker is not None:
                svc.embedded_worker.stop(timeout=5)
            bind = svc.sessions.kw.get("bind")
            if bind is not None:
                bind.dispose()

    app = FastAPI(
        title="KernelProof",
        version=__version__,
        description=DESCRIPTION,
        openapi_tags=TAGS,
        lifespan=lifespan,
    )
    app.state.service = svc
    install_problem_handlers(app)
    app.add_middleware(GateMiddleware, service=svc)
    for module in (submissions, tasks, leaderboard, health):
        app.include_router(module.router)
    return app
