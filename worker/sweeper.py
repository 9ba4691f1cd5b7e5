"""The sweeper: re-queues submissions stuck in running past their lease (their worker died) and re-sends
submissions whose queue message was lost. Every step is a compare-and-set, so any number of sweepers may
run."""

from __future__ import annotations

import logging
import threading
from collections import defaultdict
from datetime import datetime

from sqlalchemy.orm import Session, sessionmaker

from kernelproof_core.settings import Settings
from kernelproof_core.store import transitions
from worker.dispatch import Dispatcher

log = logging.getLogger(__name__)


def sweep_once(sessions: sessionmaker[Session], settings: Settings, dispatcher: Dispatcher) -> int:
    """One pass; returns how many submissions were (re-)dispatched."""
    sent = 0
    with sessions() as session:
        for sid, gpu_class in transitions.requeue_expired(session, settings.job_max_attempts):
            log.warning("submission %s: running past its deadline; re-queued", sid)
            dispatcher.dispatch(sid, gpu_class)
            sent += 1
        stale = transitions.stale_queued(session, settings.sweeper_lost_message_after_s)
        by_class: dict[str | None, list[tuple[str, datetime]]] = defaultdict(list)
        for sid, enqueued_at, gpu_class in stale:
            by_class[gpu_class].append((sid, enqueued_at))
        for gpu_class, rows in by_class.items():
            depth = dispatcher.queue_depth(gpu_class)
            if depth is None or depth > 0:
                # the message may still be waiting behind others; re-sending would duplicate the backlog
                continue
            for sid, enqueued_at in rows:
                if transitions.touch_enqueued(session, sid, enqueued_at):
                    log.warning("submission %s: queued with an empty queue; message re-sent", sid)
                    dispatcher.dispatch(sid, gpu_class)
                    sent += 1
    return sent


class SweeperThread(threading.Thread):
    """Runs `sweep_once` every `sweeper_interval_s` until stopped; a failed pass is logged and retried."""

    def __init__(self, sessions: sessionmaker[Session], settings: Settings, dispatcher: Dispatcher) -> None:
        super().__init__(name="kernelproof-sweeper", daemon=True)
        self._sessions, self._settings, self._dispatcher = sessions, settings, dispatcher
        self._stop_event = threading.Event()

    def run(self) -> None:
        while not self._stop_event.wait(self._settings.sweeper_interval_s):
            try:
                sweep_once(self._sessions, self._settings, self._dispatcher)
            except Exception:
                log.exception("sweeper pass failed")

    def stop(self) -> None:
        self._stop_event.set()
