"""The CUPTI record of a profiled gate call, and the canary that says whether the record can be trusted.

The gate's profiled call (the replay, gate 5) is where kernels the candidate did not write are found: their share
of the call's GPU time (proof.check_gpu_share). That check can only fail on what CUPTI recorded, so a record that
lost activity would pass a call whose work ran in foreign kernels. CUPTI can come back empty or cut short: kineto
tears CUPTI down asynchronously where it is told to (TEARDOWN_CUPTI), and a session that starts during a teardown
records no GPU activity; another profiler in the process, or code that ends the harness's session, does the same.

So the harness launches a kernel of its own, the canary, as the first GPU activity of the session (before the
candidate runs) and again as the last (after its work has finished, before the session stops). A record without
both is not evidence of anything: the call raises ProfilerGap, an infrastructure fault (the gate retries the call
after a pause, then gives up with `infra_error`), never a pass and never the candidate's verdict. The opening one
is what a session stopped and started again during the call lacks; the closing one, a record cut short. The
canary's name is public, so a session begun again inside the call could be handed a kernel of that name: a record
whose session began after the harness opened its own (kineto's trace_start_ns, host time) counts as no canary at
all. The canaries' own time is taken out of the record.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import torch
import triton
import triton.language as tl

from kernelproof_core.errors import InfraError

# The canaries' CUPTI name is their function's name (Triton may append a short specialisation suffix).
CANARY_KERNEL = "_kernelproof_profile_canary"
# Pauses before the profiled call is tried again after a ProfilerGap (kineto waits up to 10 s for a teardown).
PROFILE_RETRY_PAUSES_S = (1.0, 10.0)
log = logging.getLogger(__name__)
T = TypeVar("T")
_time_ns = time.time_ns  # bound before any candidate code (the time module is in the harness snapshot too)


class ProfilerGap(InfraError):
    """CUPTI's record of a profiled call lacks a harness canary launch: it cannot vouch for the call's kernels."""


@triton.jit
def _kernelproof_profile_canary(flag_ptr):  # type: ignore[no-untyped-def]
    tl.store(flag_ptr, tl.load(flag_ptr) + 1)


@dataclass
class Record:
    """GPU time per kernel name (microseconds) of one profiled call, the canaries' taken out, and how many canary
    launches the record holds (CANARIES when whole)."""

    kernel_us: dict[str, float]
    canaries: int
    gap: str = ""  # why the record is not the session the harness opened, when it is not
    busy_us: float = 0.0  # per stream, the time some activity ran (overlaps counted once), summed over streams


CANARIES = 2  # the opening and the closing launch


def is_canary(name: str) -> bool:
    return name == CANARY_KERNEL or name.startswith(CANARY_KERNEL + "_")


class ProfiledCall:
    """A CUPTI session around one call: start() (the opening canary), the call, then stop() (the closing canary
    first, on request)."""

    def __init__(self, device: torch.device, activities: list[Any] | None = None) -> None:
        self.device = device
        self.activities = activities  # None: CUDA (tests on a CPU host trace CPU activity instead)
        self._flag = torch.zeros(1, dtype=torch.int32, device=device)
        self._prof: Any = None
        self._opened_ns = 0

    def start(self) -> None:
        from torch.profiler import ProfilerActivity, profile

        self._prof = profile(activities=self.activities or [ProfilerActivity.CUDA])
        self._prof.__enter__()
        _kernelproof_profile_canary[(1,)](self._flag)
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)  # recorded before anything the call queues
        # The call begins now: the session's own start (kineto's trace_start_ns) is earlier by at least the canary's
        # launch and wait (tens of us: room for clock conversion), a session begun by the call is later.
        self._opened_ns = _time_ns()

    def stop(self, canary: bool) -> Record:
        """End the session; with `canary`, the canary kernel runs (and finishes) first, after everything queued.
        Never raises for the session itself: a session that cannot be closed or read (ended by someone else) is a
        record without canaries, which require_canary turns into a ProfilerGap after the caller's own checks."""
        from torch.autograd import DeviceType

        if canary:
            _kernelproof_profile_canary[(1,)](self._flag)
            if self.device.type == "cuda":
                torch.cuda.synchronize(self.device)
        try:
            self._prof.__exit__(None, None, None)
            events = list(self._prof.events())
        except Exception as exc:  # the session was stopped or replaced during the call
            log.warning("the profiler session could not be closed or read: %s: %s", type(exc).__name__, exc)
            return Record({}, 0, f"the session could not be closed or read ({type(exc).__name__})")
        restarted = self._restarted()
        if restarted:  # what it holds is another session's: a canary of the right name in it proves nothing
            return Record({}, 0, restarted)
        times: dict[str, float] = {}
        spans: dict[object, list[tuple[float, float]]] = {}
        canaries = 0
        for event in events:
            if event.device_type != DeviceType.CUDA:
                continue
            if is_canary(event.name):
                canaries += 1
                continue
            times[event.name] = times.get(event.name, 0.0) + float(event.time_range.elapsed_us())
            spans.setdefault(getattr(event, "device_resource_id", None), []).append(
                (float(event.time_range.start), float(event.time_range.end)))
        return Record(times, canaries, busy_us=sum(covered_us(s) for s in spans.values()))

    def _restarted(self) -> str:
        """Why the record read at stop() is not the session start() opened ("" when it is): kineto stamps each
        session with the host time it began (trace_start_ns, Unix ns), and a session ended and begun again inside
        the call began after the call did."""
        results = getattr(getattr(self._prof, "profiler", None), "kineto_results", None)
        started_ns = getattr(results, "trace_start_ns", None)
        if started_ns is None:
            log.warning("the profiler's result has no trace_start_ns: a restarted session cannot be told apart")
            return ""
        late_ns = int(started_ns()) - self._opened_ns
        return f"the session was begun again {late_ns / 1e3:.0f} us into the call" if late_ns > 0 else ""


def covered_us(spans: list[tuple[float, float]]) -> float:
    """Length of the union of (start, end) intervals. One stream's kernels run one after another, except that a
    kernel launched with programmatic dependent launch may start while the one before it ends and wait inside the
    GPU (gdc_wait): CUPTI counts that wait in its duration, and the union counts the overlap once."""
    total, end = 0.0, float("-inf")
    for a, b in sorted(spans):
        if b > end:
            total += b - max(a, end)
            end = b
    return total


def require_canary(record: Record) -> None:
    """ProfilerGap unless the record holds both canaries the harness launched around the profiled call, once each."""
    if record.canaries != CANARIES:
        recorded = f"{len(record.kernel_us)} other kernel name(s)" if record.kernel_us else "no other GPU activity"
        why = f"{record.gap}: " if record.gap else ""
        raise ProfilerGap(f"{why}the profiler's record of the call holds {record.canaries} of the harness's "
                          f"{CANARIES} canary launches ({recorded}): the session lost activity or was restarted, so "
                          "its record cannot show which kernels did the call's work")


def profiler_self_test(device: torch.device, activities: list[Any] | None = None) -> None:
    """A session around nothing but the canaries, required whole (with the retries): run once per process at start-up,
    so a profiler that records no GPU activity on this host (CUPTI unusable, another profiler holding it) is one
    clear infrastructure fault before any candidate runs, not a ProfilerGap and two retry pauses in every case."""

    def session() -> None:
        profiled = ProfiledCall(device, activities)
        profiled.start()
        require_canary(profiled.stop(canary=True))  # the first one also compiles the canary

    with_profile_retries(session, "the profiler's start-up check")


def with_profile_retries(call: Callable[[], T], what: str) -> T:
    """call(); where it raises ProfilerGap, again after each of PROFILE_RETRY_PAUSES_S. The last try's gap propagates:
    an infrastructure fault (infra_error), never the candidate's verdict and never a pass."""
    for pause_s in PROFILE_RETRY_PAUSES_S:
        try:
            return call()
        except ProfilerGap as gap:
            log.warning("%s: %s; trying again in %.0f s", what, gap, pause_s)
            time.sleep(pause_s)
    return call()
