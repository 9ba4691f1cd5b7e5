"""Getting a committed submission to a worker. The row is always committed first; a dispatch that is lost
(broker down, process killed in between) is repaired by the sweeper, so dispatching is best-effort by
design."""

from __future__ import annotations

import logging
import threading
from typing import Any, Protocol

from kernelproof_core.settings import Settings

log = logging.getLogger(__name__)

VERIFY_TASK = "kernelproof.verify_submission"


def queue_name(settings: Settings, gpu_class: str | None) -> str:
    """Queues per GPU class; unrouted submissions go to `<prefix>.any`, which every worker also consumes."""
    return f"{settings.queue_prefix}.{gpu_class or 'any'}"


class Dispatcher(Protocol):
    def dispatch(self, submission_id: str, gpu_class: str | None) -> None: ...

    def queue_depth(self, gpu_class: str | None) -> int | None:
        """Messages waiting in the queue of this class; None when the backend has no separate queue."""

    def ping(self) -> bool: ...


class CeleryDispatcher:
    """Sends by task name, so the API never imports the worker's task code (or anything it imports)."""

    def __init__(self, settings: Settings) -> None:
        from worker.celery_app import make_celery

        self._settings = settings
        self._app = make_celery(settings)
        self._redis: Any = None

    def dispatch(self, submission_id: str, gpu_class: str | None) -> None:
        try:
            self._app.send_task(VERIFY_TASK, args=[submission_id], queue=queue_name(self._settings, gpu_class))
        except Exception:  # the row is committed; the sweeper re-sends it
            log.exception("could not enqueue submission %s; the sweeper will retry", submission_id)

    def _client(self) -> Any:
        if self._redis is None:
            import redis

            self._redis = redis.Redis.from_url(self._settings.broker_url, socket_timeout=5, socket_connect_timeout=5)
        return self._redis

    def queue_depth(self, gpu_class: str | None) -> int | None:
        key = self._settings.broker_key_prefix + queue_name(self._settings, gpu_class)
        return int(self._client().llen(key))

    def ping(self) -> bool:
        try:
            return bool(self._client().ping())
        except Exception as exc:
            log.warning("broker unreachable: %s", exc)
            return False


class EmbeddedDispatcher:
    """The embedded worker drains the submissions table itself; dispatching only wakes it up."""

    def __init__(self) -> None:
        self.wakeup = threading.Event()

    def dispatch(self, submission_id: str, gpu_class: str | None) -> None:
        del submission_id, gpu_class
        self.wakeup.set()

    def queue_depth(self, gpu_class: str | None) -> int | None:
        del gpu_class
        return None

    def ping(self) -> bool:
        return True
