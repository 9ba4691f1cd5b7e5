"""One GPU shared by several concurrent sandboxed runs, with every timed phase exclusive.

Verification throughput is bounded by what runs one candidate at a time: its compile and correctness checks
(CPU-heavy, GPU-light) take most of a quick verification, its timing a fraction. Runs can overlap, so that one
candidate's compile and checks proceed while another is timed, as long as nothing else uses the GPU while a
measurement is taken. The arbiter enforces that with a rendezvous at every phase boundary of every run:

  * a child in rendezvous mode synchronizes its device, reports the phase it is about to start, and waits for the
    supervisor's "continue". Its GPU queue is empty while it waits, and candidate code only runs when the harness
    calls it, so a waiting child does nothing on the GPU (a thread left running by candidate code is `tampering`,
    and the static policy forbids threads outright);
  * EXCLUSIVE_PHASES (the timing phase, and arming, which measures copy bandwidth for the plausibility floor and the
    speed of light) are granted only when every other run is waiting at a boundary; one at a time, first come
    first served. Other phases go on at once unless an exclusive phase is running or waiting: then they wait too, so
    a waiting measurement cannot be starved;
  * during an exclusive phase every other run's child is also frozen (SIGSTOP through its fork server), whether it
    waits at a boundary or is still starting up (CUDA, CUPTI, the warm-up kernel): a thread left behind by candidate
    code cannot queue GPU work meanwhile;
  * an exclusive phase ends at its run's next boundary, or when the run ends; the runs held back then go on. A run
    whose next phase is exclusive again keeps the GPU (a run sharing the GPU times all its cases back to back:
    pipeline._run_plan), so one candidate's timing is one exclusive stretch, logged as one window.
Standby children (which start up between runs) are frozen while an exclusive phase runs, through `pausers`.

Thread-safe: every supervisor thread calls in; "continue" is sent by whichever thread makes the decision.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

log = logging.getLogger(__name__)

EXCLUSIVE_PHASES = frozenset({"arm", "measure"})


@dataclass
class _Seat:
    release: Callable[[], None]  # send "continue" to the waiting child
    freeze: Callable[[bool], None]  # stop / continue the child's process (SIGSTOP through its fork server)
    started: bool = False  # reached its first boundary (before it, the child is starting up, off any boundary)
    waiting: bool = False  # stopped at a boundary with an idle GPU queue, until released
    frozen: bool = False  # stopped (SIGSTOP) for someone's exclusive phase


class GpuArbiter:
    """Decides, at each run's phase boundaries, which runs may go on (see module docstring)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._seats: dict[str, _Seat] = {}
        self._exclusive: str | None = None  # the run in an exclusive phase
        self._queue: deque[str] = deque()  # runs waiting for an exclusive phase, in arrival order
        self._pausers: dict[str, Callable[[bool], None]] = {}
        # (monotonic time, run id, event): "joined", "reached", "released", "exclusive", "shared" (its end),
        # "frozen", "thawed", "left". Tests and benchmarks read it.
        self.log: list[tuple[float, str, str]] = []

    @property
    def exclusive_active(self) -> bool:
        return self._exclusive is not None

    def set_pauser(self, key: str, pause: Callable[[bool], None]) -> None:
        """`pause(True/False)` freezes / continues one executor's standby children around exclusive phases."""
        with self._lock:
            self._pausers[key] = pause

    def join(self, run_id: str, release: Callable[[], None], freeze: Callable[[bool], None]) -> None:
        """A run starts. Its child is starting up (CUDA, CUPTI, a warm-up kernel): during an exclusive phase it is
        frozen until that phase ends."""
        with self._lock:
            self._seats[run_id] = _Seat(release, freeze)
            self._note(run_id, "joined")
            actions = [self._freeze(run_id, True)] if self._exclusive is not None else []
        self._act(actions)

    def reached(self, run_id: str, phase: str) -> None:
        """The run's child is at a boundary, about to start `phase`, its GPU queue drained; it waits to be released."""
        with self._lock:
            seat = self._seats.get(run_id)
            if seat is None:
                return
            self._note(run_id, "reached")
            seat.started = seat.waiting = True
            if self._exclusive == run_id and phase in EXCLUSIVE_PHASES:
                # Its next timed phase right after this one (deferred measurement): it keeps the GPU, and the
                # others, already held, are not asked to reach a boundary again.
                self._note(run_id, "continued")
                actions = [self._release(run_id)]
            else:
                actions = self._reached(run_id, phase)
        self._act(actions)

    def _reached(self, run_id: str, phase: str) -> list[Callable[[], None]]:
        """(Under the lock) a boundary that is not a continuation: the run's exclusive phase, if any, ends."""
        ended = self._exclusive == run_id
        if ended:
            self._exclusive = None
            self._note(run_id, "shared")
        if phase in EXCLUSIVE_PHASES:
            self._queue.append(run_id)
        return self._schedule(ended)

    def leave(self, run_id: str) -> None:
        """The run ended (finished, killed or lost): it holds nothing any more."""
        with self._lock:
            if self._seats.pop(run_id, None) is None:
                return
            self._note(run_id, "left")
            ended = self._exclusive == run_id
            if ended:
                self._exclusive = None
            if run_id in self._queue:
                self._queue.remove(run_id)
            actions = self._schedule(ended)
        self._act(actions)

    # --- decisions (under the lock); actions run outside it ------------------------------------------------
    def _schedule(self, exclusive_ended: bool) -> list[Callable[[], None]]:
        if self._exclusive is not None:
            return []  # everyone else waits at their next boundary
        if self._queue:
            head = self._queue[0]
            others = [(rid, seat) for rid, seat in self._seats.items() if rid != head]
            # Runs still starting up are frozen for the phase; runs past their first boundary must be at one, and
            # are frozen there too: a thread that candidate code left behind cannot queue GPU work meanwhile.
            if all(seat.waiting or not seat.started for _, seat in others):
                self._queue.popleft()
                self._exclusive = head
                self._note(head, "exclusive")
                actions = [self._freeze(rid, True) for rid, seat in others if not seat.frozen]
                if self._seats[head].frozen:  # frozen for the previous exclusive phase while it waited
                    actions.append(self._freeze(head, False))
                if not exclusive_ended:
                    actions.extend(self._pause_all(True))
                return [*actions, self._release(head)]
        actions = [self._freeze(rid, False) for rid, seat in self._seats.items() if seat.frozen]
        if exclusive_ended:
            actions.extend(self._pause_all(False))
        if not self._queue:  # nothing exclusive waiting: every run at a boundary goes on
            actions.extend(self._release(rid) for rid, seat in self._seats.items() if seat.waiting)
        return actions

    def _release(self, run_id: str) -> Callable[[], None]:
        seat = self._seats[run_id]
        seat.waiting = False
        self._note(run_id, "released")
        return seat.release

    def _freeze(self, run_id: str, frozen: bool) -> Callable[[], None]:
        seat = self._seats[run_id]
        seat.frozen = frozen
        self._note(run_id, "frozen" if frozen else "thawed")
        return functools.partial(seat.freeze, frozen)

    def _pause_all(self, paused: bool) -> list[Callable[[], None]]:
        return [functools.partial(pause, paused) for pause in self._pausers.values()]

    def _note(self, run_id: str, event: str) -> None:
        self.log.append((time.monotonic(), run_id, event))
        if len(self.log) > 100_000:
            del self.log[:50_000]

    @staticmethod
    def _act(actions: list[Callable[[], None]]) -> None:
        for action in actions:
            try:
                action()
            except Exception:  # one run's broken channel shows up in its own watch; the others go on
                log.exception("arbiter action failed")


def exclusive_windows(log: list[tuple[float, str, str]]) -> list[tuple[str, float, float]]:
    """(run, start, end) of every exclusive phase in an arbiter's log (for tests and benchmarks)."""
    windows: list[tuple[str, float, float]] = []
    open_at: dict[str, float] = {}
    for t, run, event in log:
        if event == "exclusive":
            open_at[run] = t
        elif event in ("shared", "left") and run in open_at:
            windows.append((run, open_at.pop(run), t))
    return windows
