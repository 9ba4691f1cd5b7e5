"""Measuring candidate and baseline side by side.

CUDA: after warm-ups, samples of `invocations_per_sample` calls each, bracketed by CUDA events: a fixed count, or,
with a `StoppingRule`, batches until both medians reach a noise target (measurement.stopping). Candidate and baseline
samples are interleaved (their order alternating) in one process on the same inputs, so clock and thermal drift
affect both alike. Before every sample the L2 is flushed by zeroing a buffer larger than it, outside the timed
region, and calls rotate through a ring of distinct input sets so that no sample re-reads an L2-resident working
set (for working sets below L2/ring size, the ring is as large as the memory cap allows: see METHODOLOGY.md).
Around every sample, outside its timed region, the SM clock and NVML's slowdown reasons are read; throttled pairs
are discarded (measurement.clocks).

Kernel-only device time comes from torch.profiler (CUPTI) over a separate traced pass of the same calls
(measurement.device_time).

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
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import torch

from kernelproof_core.measurement.clocks import (
    THROTTLE_CLOCK_FRACTION,
    ClockMonitor,
    ClockSummary,
    SampleClock,
    summarize_clocks,
)
from kernelproof_core.measurement.device_time import kernel_time_us, kernel_times, single_call_ms, sync_gap_us, total
from kernelproof_core.measurement.stats import summarize
from kernelproof_core.measurement.stopping import StoppedBy, StoppingRule, median_rse, stop_reason
from kernelproof_core.report.models import Distribution

log = logging.getLogger(__name__)

Fn = Callable[..., Any]
_perf_counter = time.perf_counter
_Event = torch.cuda.Event
_synchronize = torch.cuda.synchronize
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
    invocations: int = 1  # the candidate's calls per sample (an upper bound where an auditor varies it)
    baseline_invocations: int = 1
    candidate_kernels: dict[str, float] | None = None  # kernel name -> us per call (profiler pass)
    sync_gap_us: float | None = None
    audited_samples: int = 0
    stopped_by: StoppedBy = "fixed_count"
    samples_taken: int = 0  # per implementation, throttled pairs included
    clocks: ClockSummary | None = None

    @property
    def candidate_rse(self) -> float | None:
        return finite_or_none(median_rse(self.candidate.samples))

    @property
    def baseline_rse(self) -> float | None:
        return finite_or_none(median_rse(self.baseline.samples))


def finite_or_none(value: float) -> float | None:
    return value if math.isfinite(value) else None


def calls_per_sample(call_ms: float, bound: int, max_sample_ms: float) -> int:
    """Calls of one implementation per sample: `bound`, or fewer where a sample would outlast `max_sample_ms`."""
    return max(1, min(bound, int(max_sample_ms / max(call_ms, 1e-6))))


def ring_size(case_bytes: int, ring_min_bytes: int, max_sets: int, max_bytes: int) -> int:
    """How many distinct input sets to rotate through: enough to exceed `ring_min_bytes`, within both caps."""
    if case_bytes <= 0:
        return 1
    wanted = -(-ring_min_bytes // case_bytes)
    affordable = max(1, max_bytes // case_bytes)
    return max(1, min(wanted, max_sets, affordable))


@dataclass(frozen=True, slots=True)
class _Sample:
    start: Any
    end: Any
    calls: int
    clock: SampleClock


class _CudaSampler:
    """Takes interleaved sample pairs and keeps the unthrottled ones (per-call microseconds)."""

    def __init__(self, candidate: Fn, baseline: Fn, input_sets: Sequence[Sequence[Any]], flush: torch.Tensor,
                 invocations: tuple[int, int], removed_us: float, auditor: SampleAuditor | None,
                 clocks: ClockMonitor, throttle_fraction: float) -> None:
        self.candidate, self.baseline, self.input_sets = candidate, baseline, input_sets
        self.throttle_fraction = throttle_fraction
        self.flush, self.removed_us = flush, removed_us
        self.invocations, self.baseline_invocations = invocations
        self.auditor, self.clocks = auditor, clocks
        self.reference_mhz = clocks.sm_clock_mhz()  # right after the warm-ups: the clock under load
        self.start = (clocks.temperature_c(), self.reference_mhz, clocks.mem_clock_mhz())
        self.taken = self.audited = self.throttled = 0
        self.measured_s = 0.0
        self.cand_us: list[float] = []
        self.base_us: list[float] = []
        self.discarded: list[tuple[float, float]] = []
        self.readings: list[SampleClock] = []

    def _one(self, fn: Fn, start_index: int, count: int, refresh: int | None) -> tuple[_Sample, Any]:
        n = len(self.input_sets)
        if self.auditor is not None:
            if refresh is not None:
                self.auditor.refresh(self.input_sets[refresh])
            self.auditor.before_flush()
        self.flush.zero_()  # evicts L2; queued before the start event, so outside the timed region
        before = self.clocks.sm_clock_mhz()  # host-side, before the start event is queued
        start = _Event(enable_timing=True)
        end = _Event(enable_timing=True)
        out = None
        start.record()
        for k in range(count):
            out = fn(*self.input_sets[(start_index + k) % n])
        _synchronize()  # the whole device: work on a side stream ends before the end event, so it is counted
        end.record()
        clock = SampleClock(before, self.clocks.sm_clock_mhz(), self.clocks.slowdown())  # after the bracket
        self.readings.append(clock)
        return _Sample(start, end, count, clock), out

    def batch(self, pairs: int) -> None:
        """Take `pairs` sample pairs, then sort them into kept and throttled."""
        pending: list[tuple[_Sample, _Sample]] = []
        auditor, n = self.auditor, len(self.input_sets)
        for _ in range(pairs):
            s = self.taken
            count = auditor.calls(s, self.invocations) if auditor is not None else self.invocations
            last = (s * self.invocations + count - 1) % n
            check = auditor is not None and auditor.audit(s)
            got: dict[bool, _Sample] = {}
            for fn in (self.candidate, self.baseline) if s % 2 == 0 else (self.baseline, self.candidate):
                is_candidate = fn is self.candidate
                if is_candidate:
                    sample, out = self._one(fn, s * self.invocations, count, last if check else None)
                else:
                    sample, out = self._one(fn, s * self.baseline_invocations, self.baseline_invocations, None)
                got[is_candidate] = sample
                if is_candidate and auditor is not None:
                    auditor.after_sample(out, self.input_sets[last], audited=check)
                    self.audited += int(check)
                del out
            pending.append((got[True], got[False]))
            self.taken += 1
        _synchronize()
        for cand, base in pending:
            cand_ms, base_ms = cand.start.elapsed_time(cand.end), base.start.elapsed_time(base.end)
            pair = (self._per_call_us(cand_ms, cand.calls), self._per_call_us(base_ms, base.calls))
            if any(x.clock.throttled(self.reference_mhz, self.throttle_fraction) for x in (cand, base)):
                self.throttled += 1
                self.discarded.append(pair)
            else:
                self.cand_us.append(pair[0])
                self.base_us.append(pair[1])
                self.measured_s += (cand_ms + base_ms) / 1000.0

    def _per_call_us(self, elapsed_ms: float, calls: int) -> float:
        return float(max(0.0, elapsed_ms * 1000.0 - self.removed_us) / calls)


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
    stopping: StoppingRule | None = None,
    clocks: ClockMonitor | None = None,
    throttle_fraction: float = THROTTLE_CLOCK_FRACTION,
) -> PairTiming:
    """Interleaved CUDA-event timing of candidate and baseline (per-invocation microseconds).

    `invocations` is an upper bound, applied to candidate and baseline separately: where a call would make a sample
    longer than `max_sample_ms`, that implementation makes fewer calls per sample (PairTiming.invocations and
    baseline_invocations say how many), so a 1 GB case costs seconds, not minutes, and still gets every sample.
    The bounds are separate because each sample carries a fixed cost beyond its calls (on the H200, 100-150 us per
    sample: events exceed CUPTI kernel time by that over the sample's calls; see METHODOLOGY.md), which a fast
    candidate must not spread over only the few calls that a slow eager baseline fits in a sample. With an auditor,
    each candidate sample makes a random number of calls up to its bound; each per-call time divides by its count.
    Without `stopping`, exactly `samples` pairs are taken; with it, batches until `stop_reason` says stop.
    `clocks` (opened by the caller for the whole case) flags throttled pairs; without it nothing is discarded.
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
    counts = (calls_per_sample(single_call_ms(candidate, input_sets[0]), invocations, max_sample_ms),
              calls_per_sample(single_call_ms(baseline, input_sets[0]), invocations, max_sample_ms))
    gap_us = sync_gap_us()
    removed_us = gap_us if gap_us <= MAX_SYNC_GAP_US else 0.0

    monitor = clocks if clocks is not None else ClockMonitor()
    sampler = _CudaSampler(candidate, baseline, input_sets, flush, counts, removed_us, auditor, monitor,
                           throttle_fraction)
    stopped_by: StoppedBy = "fixed_count"
    began = _perf_counter()
    if stopping is None:
        sampler.batch(samples)
    else:
        while True:
            sampler.batch(min(stopping.batch_samples, stopping.max_samples - sampler.taken))
            reason = stop_reason(stopping, sampler.cand_us, sampler.base_us, taken=sampler.taken,
                                 measured_s=sampler.measured_s, elapsed_s=_perf_counter() - began)
            if reason is not None:
                stopped_by = reason
                break
    notes = [monitor.note] if monitor.note else []
    cand_us, base_us = sampler.cand_us, sampler.base_us
    if not cand_us:  # every pair throttled: report them, flagged, rather than nothing
        cand_us, base_us = [c for c, _ in sampler.discarded], [b for _, b in sampler.discarded]
        notes.append("every sample pair was taken while the GPU throttled: none discarded")

    cand_dev, base_dev, source, kernels = None, None, None, None
    try:
        kernels = kernel_times(candidate, input_sets, profiler_invocations)
        cand_dev = total(kernels)
        base_dev = total(kernel_times(baseline, input_sets, profiler_invocations))
        source = f"torch.profiler (CUPTI): summed kernel durations, mean of {profiler_invocations} calls"
    except Exception as exc:  # the profiler is an extra; its failure must not fail the case
        notes.append(f"kernel-only time unavailable: {type(exc).__name__}: {exc}")
        log.warning(notes[-1])
    return PairTiming(
        summarize(cand_us), summarize(base_us), cand_dev, base_dev, source, "; ".join(notes) or None, counts[0],
        baseline_invocations=counts[1],
        candidate_kernels=kernels, sync_gap_us=removed_us, audited_samples=sampler.audited, stopped_by=stopped_by,
        samples_taken=sampler.taken,
        clocks=summarize_clocks(sampler.start, sampler.readings, sampler.throttled, monitor.available),
    )


def measure_interpreter(
    candidate: Fn,
    baseline: Fn,
    input_sets: Sequence[Sequence[Any]],
    samples: int,
    auditor: SampleAuditor | None = None,
) -> PairTiming:
    """Wall-clock timing of single calls under the Triton interpreter. Labelled; never rewarded. With an auditor,
    every candidate sample runs on refreshed inputs and its output is verified, outside the timed call. Always a
    fixed count: adaptive stopping is for GPU timings, and interpreter calls take seconds."""

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
        audited_samples=samples if auditor is not None else 0, stopped_by="fixed_count", samples_taken=samples,
    )


__all__ = ["PairTiming", "kernel_time_us", "measure_cuda", "measure_interpreter", "ring_size", "sync_gap_us"]
