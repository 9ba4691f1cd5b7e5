"""Keeping a running attempt's claim alive. The row is held for `job_lease_s` at a time and renewed every third of
it while the attempt runs, so a worker that dies (SIGKILL, a preempted node) is noticed after one lease, when the
sweeper re-queues its job, instead of after `job_deadline_s`, the longest an attempt may legitimately take."""

from __future__ import annotations

import logging
import threading

from sqlalchemy.orm import Session, sessionmaker

from kernelproof_core.store import transitions
from kernelproof_core.store.session import UNAVAILABLE_ERRORS
from kernelproof_core.store.transitions import Claim

log = logging.getLogger(__name__)
JOIN_S = 10.0  # longest wait for a renewal in flight when the attempt ends


class LeaseKeeper:
    """A thread renewing `claim`'s lease while the `with` block runs; it stops renewing once another attempt took the
    submission over (this attempt's result will then be discarded as stale by the compare-and-set)."""

    def __init__(self, sessions: sessionmaker[Session], claim: Claim, lease_s: float) -> None:
        self.sessions, self.claim, self.lease_s = sessions, claim, lease_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"lease-{claim.submission_id[:8]}", daemon=True)

    def __enter__(self) -> LeaseKeeper:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(timeout=JOIN_S)  # a renewal stuck connecting must not hold the worker (daemon thread)

    def _run(self) -> None:
        sid, attempt = self.claim.submission_id, self.claim.attempt_no
        while not self._stop.wait(self.lease_s / 3):
            try:
                with self.sessions() as session:
                    if transitions.renew_lease(session, self.claim, self.lease_s):
                        continue
                log.warning("submission %s: attempt %d was taken over by another; its result will be discarded",
                            sid, attempt)
                return
            except UNAVAILABLE_ERRORS as exc:  # the lease may lapse meanwhile; the compare-and-set keeps one verdict
                log.warning("submission %s: lease of attempt %d not renewed, the database did not answer (%s)", sid,
                            attempt, type(exc).__name__)
            except Exception:
                log.exception("submission %s: lease of attempt %d not renewed", sid, attempt)
