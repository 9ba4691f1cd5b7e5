"""What a running API holds: settings, database sessions, the dispatcher, the rate limiter and metrics."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from sqlalchemy.orm import Session, sessionmaker

from api.metrics import ServiceMetrics
from api.ratelimit import MemoryRateLimiter, RateLimiter, RedisRateLimiter
from kernelproof_core.campaign import Device
from kernelproof_core.settings import Settings
from kernelproof_core.store.session import session_factory_for
from worker.dispatch import CeleryDispatcher, Dispatcher, EmbeddedDispatcher

if TYPE_CHECKING:
    from worker.embedded import EmbeddedWorker


@dataclass
class ClientIdentity:
    """Who is calling: an API key, or nobody when authentication is disabled."""

    key_id: int | None
    name: str
    rate_limit_per_minute: int | None = None


@dataclass
class ServiceState:
    settings: Settings
    sessions: sessionmaker[Session]
    dispatcher: Dispatcher
    limiter: RateLimiter
    device: Device
    metrics: ServiceMetrics
    embedded_worker: EmbeddedWorker | None = None


def resolve_service_device(settings: Settings) -> Device:
    """The device campaigns are built for. A distributed API host has no GPU, its workers do: cuda unless
    told; the embedded service runs jobs on its own host, so `auto` looks at this machine."""
    if settings.service_device != "auto":
        return settings.service_device
    if settings.queue_backend == "celery":
        return "cuda"
    from kernelproof_core.environment import resolve_device

    return resolve_device("auto")


def build_service(
    settings: Settings, dispatcher: Dispatcher | None = None, start_embedded_worker: bool = True
) -> ServiceState:
    sessions = session_factory_for(settings)
    limiter: RateLimiter
    worker = None
    if settings.queue_backend == "embedded":
        embedded = dispatcher if isinstance(dispatcher, EmbeddedDispatcher) else EmbeddedDispatcher()
        dispatcher = dispatcher or embedded
        limiter = MemoryRateLimiter()
        if start_embedded_worker:
            from worker.embedded import EmbeddedWorker

            worker = EmbeddedWorker(sessions, settings, embedded)
    else:
        dispatcher = dispatcher or CeleryDispatcher(settings)
        limiter = RedisRateLimiter(settings.broker_url, settings.broker_key_prefix)
    return ServiceState(
        settings=settings,
        sessions=sessions,
        dispatcher=dispatcher,
        limiter=limiter,
        device=resolve_service_device(settings),
        metrics=ServiceMetrics(sessions, dispatcher, settings),
        embedded_worker=worker,
    )
