"""One observed candidate call: launches, torch ops, timers, threads, streams and deferred writes, around a gate call.

Order inside `CallGuard.watch`:
  1. the harness is checked intact (tampering between calls is caught before the next one);
  2. launch wrappers, the torch-op tracer and (for profiled calls on a GPU) CUPTI are armed, the candidate runs;
  3. right after it returns, the output is copied (stream-ordered on a GPU): its content "as returned";
  4. the whole device is synchronised, then the harness is checked again: timers, tables, mode stacks, threads
     still running, launches on a stream other than the caller's (all `tampering`);
  5. the output must equal its copy from step 3: a change means work finished after the call returned (a side
     stream, a thread, a deferred launch), which is `tampering`;
  6. a profiled call's CUPTI record must hold the canary kernels the harness launched before and after the observed
     window (profiled.py): without both the record is not evidence, and the call is an infrastructure fault
     (ProfilerGap).
Gate calls are never timed, so none of this touches a measurement.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import torch

from kernelproof_core.errors import CandidateFailure
from kernelproof_core.integrity.dispatch import ComputeTracer, DispatchTrace
from kernelproof_core.integrity.launches import LaunchLog, LaunchObserver
from kernelproof_core.integrity.profiled import ProfiledCall, Record, profiler_self_test, require_canary
from kernelproof_core.integrity.tamper import HarnessSnapshot
from kernelproof_core.verdicts import Verdict


@dataclass
class Watch:
    """Filled by the caller (`out`) and by the guard (evidence) for one call."""

    out: Any = None
    returned: bool = False
    log: LaunchLog | None = None
    trace: DispatchTrace = field(default_factory=DispatchTrace)
    kernel_us: dict[str, float] | None = None


def _plain_tensor(out: Any, device: torch.device) -> bool:
    # Anything else fails the output contract; touching it here could run candidate code (a lazy subclass).
    return type(out) is torch.Tensor and not vars(out) and out.device.type == device.type


def bitwise_equal(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Bit-for-bit equality (NaN payloads and signed zeros included), independent of strides."""
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    ints = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[a.element_size()]
    return bool(torch.equal(a.contiguous().view(ints), b.contiguous().view(ints)))


class CallGuard:
    """Observes every gate call of one candidate run."""

    def __init__(self, snapshot: HarnessSnapshot, observer: LaunchObserver, owner: dict[str, Any],
                 device: torch.device) -> None:
        self.snapshot = snapshot
        self.observer = observer
        self.owner = owner
        self.device = device

    def check(self) -> None:
        """`tampering` unless the harness, Triton's launch path and the thread set are as they were."""
        self.snapshot.verify()
        replaced = self.observer.intact()
        if replaced:
            raise CandidateFailure(Verdict.TAMPERING, f"Triton's launch path was replaced: {', '.join(replaced)}")

    def tampering(self) -> CandidateFailure | None:
        """After our own code failed: was it because the candidate altered something that code relies on?"""
        try:
            self.check()
        except CandidateFailure as failure:
            return failure
        except Exception as exc:  # the checker itself broke: that too is something done to the harness
            return CandidateFailure(Verdict.TAMPERING, f"the harness check failed: {type(exc).__name__}: {exc}")
        return None

    def synchronize(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)  # the whole device: every stream, not just the caller's

    @contextmanager
    def watch(self, profile: bool = False) -> Iterator[Watch]:
        self.check()
        cuda = self.device.type == "cuda"
        stream = torch.cuda.current_stream(self.device).cuda_stream if cuda else None
        holder = Watch()
        copy: torch.Tensor | None = None
        profiled = ProfiledCall(self.device) if profile and cuda else None
        record: Record | None = None
        clean = False
        if profiled is not None:
            profiled.start()  # the opening canary is the harness's launch: before the observed window
        try:
            with self.observer.observe(self.owner, interpreter=not cuda) as log:
                holder.log = log
                tracer = ComputeTracer()
                try:
                    with tracer:
                        yield holder
                        holder.returned = True
                finally:
                    holder.trace = tracer.trace
                    if holder.returned:
                        with _candidate_faults():  # an asynchronous fault of its kernels surfaces here
                            if _plain_tensor(holder.out, self.device):
                                copy = holder.out.clone()  # stream-ordered: what the caller's stream sees at return
                            self.synchronize()
            clean = True  # returned, and its work finished without a fault
        finally:  # the canary goes out after the observed window: it is the harness's launch, not the candidate's
            if profiled is not None:
                record = profiled.stop(canary=clean)
                holder.kernel_us = record.kernel_us
        self.check()
        foreign = log.foreign_streams(stream)
        if foreign:
            raise CandidateFailure(Verdict.TAMPERING, f"kernels launched on a stream other than the caller's: "
                                   f"{', '.join(sorted(set(foreign))[:5])} (their time escapes the caller's events)")
        if copy is not None and not bitwise_equal(copy, holder.out):
            raise CandidateFailure(Verdict.TAMPERING, "the output changed after the call returned: work was "
                                   "deferred past the end of the call (side stream, thread or later launch)")
        if record is not None:
            require_canary(record)


@contextmanager
def _candidate_faults() -> Iterator[None]:
    """Waiting for the candidate's work can surface its faults (an illegal address): those are its verdicts."""
    try:
        yield
    except torch.OutOfMemoryError as exc:
        raise CandidateFailure(Verdict.RESOURCE_LIMIT, f"out of device memory: {exc}"[:500]) from None
    except RuntimeError as exc:
        raise CandidateFailure(Verdict.RUNTIME_ERROR, f"{type(exc).__name__}: {exc}"[:2000]) from None


@functools.cache
def warm_up(device_type: str, observer: LaunchObserver) -> None:
    """Do once, before the harness snapshot, everything an observed call does for the first time: lazy imports
    (torch._dynamo rebinds torch.manual_seed; see dispatch.preload_dynamo), a traced op, a profiled and an observed
    Triton launch of a trusted kernel. Otherwise their side effects would look like changes made by the candidate's
    first call. The profiled launch is the profiler's self-test: on CUDA a record without the canaries raises
    ProfilerGap here, once, before any candidate runs."""
    import torch._dynamo
    import torch.profiler
    import triton
    import triton.language as tl

    with ComputeTracer():
        torch.empty(1).add_(1)

    @triton.jit
    def _warm(x_ptr):  # type: ignore[no-untyped-def]
        tl.store(x_ptr, tl.load(x_ptr) + 1)

    x = torch.zeros(1, device="cuda" if device_type == "cuda" else "cpu")
    with observer.observe({}, interpreter=device_type != "cuda"):
        _warm[(1,)](x)
    if device_type == "cuda":
        profiler_self_test(torch.device("cuda"))  # compiles the canary before the harness snapshot
        torch.cuda.synchronize()


