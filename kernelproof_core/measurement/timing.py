"""Measuring candidate and baseline side by side.

CUDA: after warm-ups, `samples` samples of `invocations_per_sample` calls each, bracketed by CUDA events. Candidate
and baseline samples are interleaved (their order alternating) in one process on the same inputs, so clock and
thermal drift affect both alike. Before every sample the L2 is flushed by zeroing a buffer larger than it, outside the
timed region, and calls rotate through a ring of distinct input sets so that no sample re-reads an L2-resident working
set (for working sets below L2/ring size, the ring is as large as the memory cap allows: see METHODOLOGY.md).

Kernel-only device time comes from torch.profiler (CUPTI) over a separate traced pass of the same calls.

Interpreter: wall-clock samples of single calls, labelled as such; they never feed a reward.

Integrity (kernelproof_core/integrity/audit.py supplies the auditor): every sample ends with a whole-device
synchronize before its end event, so work on any stream is counted; the constant cost of that synchronize is
calibrated on empty samples and removed. Between samples, never inside them, the auditor checks the harness and, on
randomly chosen samples, refreshes the input set of the sample's last call and verifies that call's output. Timers
and the event class are bound when this module is imported, before any candidate code runs, so patching
`time.perf_counter` or `torch.cuda.Event` afterwards cannot change a measurement (and is reported as tampering).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import torch

from kernelproof_core.measurement.stats import summarize
from kernelproof_core.report.models import Distribution

log = logging.getLogger(__name__)

Fn = Callable[..., Any]
_perf_counter = time.perf_counter
_Event = torch.cuda.Event
_synchronize = torch.cuda.synchronize
SYNC_GAP_SAMPLES = 20
MAX_SYNC_GAP_US = 100.0  # a calibration above this is not trusted (something kept the device busy): nothing removed


class SampleAuditor(Protocol):
    """Checks between samples (see kernelproof_core.integrity.audit.SampleAuditor)."""

    def calls(self, sample: int, invocations: int) -> int: ...

    def audit(self, sample: int) -> bool: ...

    def refresh(self, inputs: Sequence[Any]) -> None: ...

    def before_flush(self) -> None: ...

    def after_sample(self, out: Any, inputs: Sequence[Any], audited: bool) -> None: ...


@dataclass(frozen=True, slots=True)
class PairTiming:
    candidate: Distribution
    baseline: Distribution
    candidate_device_us: float | None
    baseline_device_us: float | None
    device_time_source: str | None
    note: str | None = None
    invocations: int = 1
    candidate_kernels: dict[str, float] | None = None  # kernel name -> us per call (profiler pass)
    sync_gap_us: float | None = None
    audited_samples: int = 0


def ring_size(case_bytes: int, ring_min_bytes: int, max_sets: int, max_bytes: int) -> int:
    """How many distinct input sets to rotate through: enough to exceed `ring_min_bytes`, within both caps."""
    if case_bytes <= 0:
        return 1
    wanted = -(-ring_min_bytes // case_bytes)
    affordable = max(1, max_bytes // case_bytes)
    return max(1, min(wanted, max_sets, affordable))


def measure_cuda(
    candidate: Fn,
    baseline: Fn,
    input_sets: Sequence[Sequence[Any]],
    *,
    warmups: int,
    samples: int,
    invocations: int,
    l2_flush_bytes: int,
    profiler_invocations: int,
    max_sample_ms: float,
    auditor: SampleAuditor | None = None,
) -> PairTiming:
    """Interleaved CUDA-event timing of candidate and baseline (per-invocation microseconds).

    `invocations` is an upper bound: when the slower of the two calls would make a sample longer than
    `max_sample_ms`, fewer calls per sample are made (PairTiming.invocations says how many), so a 1 GB case costs
    seconds, not minutes, and still gets every sample. With an auditor, each sample makes a random number of calls
    up to that bound (the same for candidate and baseline), and each per-call time divides by its own count.
    """
    device = torch.device("cuda")
    flush = torch.empty(l2_flush_bytes, dtype=torch.uint8, device=device)
    n = len(input_sets)
    for i in range(warmups):
        candidate(*input_sets[i % n])
        baseline(*input_sets[i % n])
    _synchronize()
    if auditor is not None:
        auditor.after_sample(None, input_sets[0], audited=False)
    slowest_ms = max(_single_call_ms(candidate, input_sets[0]), _single_call_ms(baseline, input_sets[0]))
    invocations = max(1, min(invocations, int(max_sample_ms / max(slowest_ms, 1e-6))))
    gap_us = sync_gap_us()
    removed_us = gap_us if gap_us <= MAX_SYNC_GAP_US else 0.0

    def one_sample(fn: Fn, start_index: int, count: int, refresh: int | None) -> tuple[Any, Any, Any]:
        if auditor is not None:
            if refresh is not None:
                auditor.refresh(input_sets[refresh])
            auditor.before_flush()
        flush.zero_()  # evicts L2; queued before the start event, so outside the timed region
        start = _Event(enable_timing=True)
        end = _Event(enable_timing=True)
        out = None
        start.record()
        for k in range(count):
            out = fn(*input_sets[(start_index + k) % n])
        _synchronize()  # the whole device: work on a side stream ends before the end event, so it is counted
        end.record()
        return start, end, out

    cand: list[tuple[Any, Any, int]] = []
    base: list[tuple[Any, Any, int]] = []
    audited = 0
    for s in range(samples):
        count = auditor.calls(s, invocations) if auditor is not None else invocations
        last = (s * invocations + count - 1) % n
        check = auditor is not None and auditor.audit(s)
        for fn in (candidate, baseline) if s % 2 == 0 else (baseline, candidate):
            is_candidate = fn is candidate
            start, end, out = one_sample(fn, s * invocations, count, last if is_candidate and check else None)
            (cand if is_candidate else base).append((start, end, count))
            if is_candidate and auditor is not None:
                auditor.after_sample(out, input_sets[last], audited=check)
                audited += int(check)
            del out
    _synchronize()
    cand_us = [max(0.0, st.elapsed_time(en) * 1000.0 - removed_us) / c for st, en, c in cand]
    base_us = [max(0.0, st.elapsed_time(en) * 1000.0 - removed_us) / c for st, en, c in base]

    cand_dev, base_dev, source, note, kernels = None, None, None, None, None
    try:
        kernels = kernel_times(candidate, input_sets, profiler_invocations)
        cand_dev = _total(kernels)
        base_dev = _total(kernel_times(baseline, input_sets, profiler_invocations))
        source = f"torch.profiler (CUPTI): summed kernel durations, mean of {profiler_invocations} calls"
    except Exception as exc:  # the profiler is an extra; its failure must not fail the case
        note = f"kernel-only time unavailable: {type(exc).__name__}: {exc}"
        log.warning(note)
    return PairTiming(summarize(cand_us), summarize(base_us), cand_dev, base_dev, source, note, invocations,
                      candidate_kernels=kernels, sync_gap_us=removed_us, audited_samples=audited)


def sync_gap_us(samples: int = SYNC_GAP_SAMPLES) -> float:
    """Median GPU time between a start event and an end event recorded right after a whole-device synchronize on an
    idle device: the constant that ending every sample with a synchronize adds (host wake-up plus event launch)."""
    gaps = []
    for _ in range(samples):
        start = _Event(enable_timing=True)
        end = _Event(enable_timing=True)
        start.record()
        _synchronize()
        end.record()
        end.synchronize()
        gaps.append(start.elapsed_time(end) * 1000.0)
    gaps.sort()
    return float(gaps[len(gaps) // 2])


def _single_call_ms(fn: Fn, inputs: Sequence[Any]) -> float:
    start = _Event(enable_timing=True)
    end = _Event(enable_timing=True)
    start.record()
    fn(*inputs)
    end.record()
    end.synchronize()
    return float(start.elapsed_time(end))


def kernel_time_us(fn: Fn, input_sets: Sequence[Sequence[Any]], calls: int) -> float:
    """Mean summed GPU kernel time per call (microseconds) over `calls` traced calls.

    Only kernels launched inside the traced region count (the L2 flush is outside it), so this is the device time the
    call's kernels took, without launch gaps.
    """
    return _total(kernel_times(fn, input_sets, calls))


def kernel_times(fn: Fn, input_sets: Sequence[Sequence[Any]], calls: int) -> dict[str, float]:
    """GPU time per call of each kernel name (microseconds), over `calls` traced calls."""
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    n = len(input_sets)
    _synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for i in range(calls):
            fn(*input_sets[i % n])
        _synchronize()
    times: dict[str, float] = {}
    for e in prof.events():
        if e.device_type == DeviceType.CUDA:
            times[e.name] = times.get(e.name, 0.0) + float(e.time_range.elapsed_us()) / calls
    if sum(times.values()) <= 0:
        raise RuntimeError("profiler recorded no kernels")
    return times


def _total(times: dict[str, float]) -> float:
    return float(sum(times.values()))


def measure_interpreter(
    candidate: Fn,
    baseline: Fn,
    input_sets: Sequence[Sequence[Any]],
    samples: int,
    auditor: SampleAuditor | None = None,
) -> PairTiming:
    """Wall-clock timing of single calls under the Triton interpreter. Labelled; never rewarded. With an auditor,
    every candidate sample runs on refreshed inputs and its output is verified, outside the timed call."""

    def wall(fn: Fn, audit: bool) -> list[float]:
        out = []
        for i in range(samples):
            inputs = input_sets[i % len(input_sets)]
            if audit and auditor is not None:
                auditor.refresh(inputs)
            t0 = _perf_counter()
            result = fn(*inputs)
            out.append((_perf_counter() - t0) * 1e6)
            if audit and auditor is not None:
                auditor.after_sample(result, inputs, audited=True)
        return out

    cand = wall(candidate, True)
    base = wall(baseline, False)
    return PairTiming(
        summarize(cand), summarize(base), None, None, None,
        note="Triton interpreter on CPU: wall-clock, not GPU time; never feeds a reward",
        audited_samples=samples if auditor is not None else 0,
    )
