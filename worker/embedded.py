"""The embedded worker: a thread in the `kernelproof serve` process that drains the submissions table itself.

No broker: the table is the queue (claim by compare-and-set, oldest first). Attempts still run in the job
process (worker.job_host), so the API process never executes candidate code. Running rows left by a previous run of this
host's embedded service are re-queued at start.
"""

from __future__ import annotations

import logging
import socket
import threading
import time

from sqlalchemy.orm import Session, sessionmaker

from kernelproof_core.settings import Settings
from kernelproof_core.store import transitions
from worker.dispatch import EmbeddedDispatcher
from worker.execution import process_submission
from worker.job_host import JobHost
from worker.sweeper import sweep_once

log = logging.getLogger(__name__)
IDLE_POLL_S = 2.0


class EmbeddedWorker(threading.Thread):
    def __init__(self, sessions: sessionmaker[Session], settings: Settings, dispatcher: EmbeddedDispatcher) -> None:
        super().__init__(name="kernelproof-embedded-worker", daemon=True)
        self._sessions, self._settings, self._dispatcher = sessions, settings, dispatcher
        self._stop_event = threading.Event()
        self.name_prefix = f"embedded@{socket.gethostname()}:"
        self._host = JobHost(persistent=settings.sandbox_enabled)

    def stop(self, timeout: float | None = None) -> None:
        self._stop_event.set()
        self._dispatcher.wakeup.set()
        if self.is_alive():
            self.join(timeout)

    def run(self) -> None:
        with self._sessions() as session:
            orphans = transitions.expire_running_of(session, self.name_prefix)
        if orphans:
            log.warning("re-queueing %d submission(s) left running by a previous embedded service", orphans)
        # KERNELPROOF_WORKER_OVERLAP = N: N drain loops sharing the job host, whose job process overlaps them.
        helpers = [threading.Thread(target=self._drain, args=(False, 0), name=f"kernelproof-embedded-worker-{i}",
                                    daemon=True) for i in range(1, self._settings.worker_overlap)]
        for helper in helpers:
            helper.start()
        self._drain(True, orphans)
        for helper in helpers:
            helper.join()
        self._host.close()

    def _drain(self, sweeps: bool, orphans: int) -> None:
        """Claim and process queued submissions until stopped; `sweeps`: this loop also runs the sweeper."""
        me = f"{self.name_prefix}{threading.get_native_id()}"
        last_sweep = float("-inf")
        while not self._stop_event.is_set():
            try:
                if sweeps and (time.monotonic() - last_sweep >= self._settings.sweeper_interval_s or orphans):
                    sweep_once(self._sessions, self._settings, self._dispatcher)
                    last_sweep, orphans = time.monotonic(), 0
                with self._sessions() as session:
                    sid = transitions.next_queued(session)
                if sid is not None:
                    process_submission(self._sessions, self._settings, sid, me, self._dispatcher.dispatch, self._host)
                    continue
            except Exception:
                log.exception("embedded worker iteration failed")
                self._stop_event.wait(IDLE_POLL_S)
            self._dispatcher.wakeup.wait(IDLE_POLL_S)
            self._dispatcher.wakeup.clear()
