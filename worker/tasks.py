"""Celery tasks of the GPU worker. The task only orchestrates: claim, spawn the job process, record."""

from __future__ import annotations

import logging
from functools import lru_cache
from typing import Any

from celery.signals import worker_ready, worker_shutting_down
from sqlalchemy.exc import OperationalError
from sqlalchemy.orm import Session, sessionmaker

from kernelproof_core.settings import get_settings
from kernelproof_core.store.session import session_factory_for
from worker.celery_app import app
from worker.dispatch import VERIFY_TASK, CeleryDispatcher
from worker.execution import process_submission, worker_name
from worker.job_host import JobHost
from worker.sweeper import SweeperThread

log = logging.getLogger(__name__)
_sweeper: SweeperThread | None = None


@lru_cache(maxsize=1)
def _sessions() -> sessionmaker[Session]:
    return session_factory_for(get_settings())


@lru_cache(maxsize=1)
def _dispatcher() -> CeleryDispatcher:
    return CeleryDispatcher(get_settings())


@lru_cache(maxsize=1)
def _host() -> JobHost:
    # Warm across jobs with the sandbox (fresh sandboxed child per candidate anyway); fresh per job without it.
    return JobHost(persistent=get_settings().sandbox_enabled)


@app.task(name=VERIFY_TASK, autoretry_for=(OperationalError,), retry_backoff=True, max_retries=5)
def verify_submission(submission_id: Any) -> str:
    """Verify one submission. A duplicate delivery finds the row final or busy and does nothing."""
    if not isinstance(submission_id, str) or not submission_id.isalnum() or len(submission_id) > 32:
        log.error("ignoring malformed message argument %r", submission_id)
        return "malformed"
    settings = get_settings()
    return process_submission(
        _sessions(), settings, submission_id, worker_name("celery"), _dispatcher().dispatch, _host()
    )


@worker_ready.connect
def _start_sweeper(**_: Any) -> None:
    global _sweeper
    if get_settings().sweeper_enabled and _sweeper is None:
        _sweeper = SweeperThread(_sessions(), get_settings(), _dispatcher())
        _sweeper.start()
        log.info("sweeper started (every %.0f s)", get_settings().sweeper_interval_s)


@worker_shutting_down.connect
def _stop_sweeper(**_: Any) -> None:
    if _sweeper is not None:
        _sweeper.stop()
    _host().close()
