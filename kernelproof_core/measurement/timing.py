"""Measuring candidate and baseline side by side.

CUDA: after warm-ups, `samples` samples of `invocations_per_sample` calls each, bracketed by CUDA events. Candidate
and baseline samples are interleaved (their order alternating) in one process on the same inputs, so clock and
thermal drift affect both alike. Before every sample the L2 is flushed by zeroing a buffer larger than it, outside the
timed region, and calls rotate through a ring of distinct input sets so that no sample re-reads an L2-resident working
set (for working sets below L2/ring size, the ring is as large as the memory cap allows: see METHODOLOGY.md).

Kernel-only device time comes from torch.profiler (CUPTI) over a separate traced pass of the same calls.

Interpreter: wall-clock samples of single calls, labelled as such; they never feed a reward.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from kernelproof_core.measurement.stats import summarize
from kernelproof_core.report.models import Distribution

log = logging.getLogger(__name__)

Fn = Callable[..., Any]


@dataclass(frozen=True, slots=True)
class PairTiming:
    candidate: Distribution
    baseline: Distribution
    candidate_device_us: float | None
    baseline_device_us: float | None
    device_time_source: str | None
    note: str | None = None
    invocations: int = 1


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
) -> PairTiming:
    """Interleaved CUDA-event timing of candidate and baseline (per-invocation microseconds).

    `invocations` is an upper bound: when the slower of the two calls would make a sample longer than
    `max_sample_ms`, fewer calls per sample are made (PairTiming.invocations says how many), so a 1 GB case costs
    seconds, not minutes, and still gets every sample.
    """
    device = torch.device("cuda")
    flush = torch.empty(l2_flush_bytes, dtype=torch.uint8, device=device)
    n = len(input_sets)
    for i in range(warmups):
        candidate(*input_sets[i % n])
        baseline(*input_sets[i % n])
    torch.cuda.synchronize()
    slowest_ms = max(_single_call_ms(candidate, input_sets[0]), _single_call_ms(baseline, input_sets[0]))
    invocations = max(1, min(invocations, int(max_sample_ms / max(slowest_ms, 1e-6))))

    def one_sample(fn: Fn, start_index: int) -> tuple[torch.cuda.Event, torch.cuda.Event]:
        flush.zero_()  # evicts L2; queued before the start event, so outside the timed region
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        for k in range(invocations):
            fn(*input_sets[(start_index + k) % n])
        end.record()
        return start, end

    cand_events: list[tuple[torch.cuda.Event, torch.cuda.Event]] = []
    base_events: list[tuple[torch.cuda.Event, torch.cuda.Event]] = []
    for s in range(samples):
        first, second = (candidate, baseline) if s % 2 == 0 else (baseline, candidate)
        a = one_sample(first, s * invocations)
        b = one_sample(second, s * invocations)
        cand, base = (a, b) if s % 2 == 0 else (b, a)
        cand_events.append(cand)
        base_events.append(base)
    torch.cuda.synchronize()
    cand_us = [st.elapsed_time(en) * 1000.0 / invocations for st, en in cand_events]
    base_us = [st.elapsed_time(en) * 1000.0 / invocations for st, en in base_events]

    cand_dev, base_dev, source, note = None, None, None, None
    try:
        cand_dev = kernel_time_us(candidate, input_sets, profiler_invocations)
        base_dev = kernel_time_us(baseline, input_sets, profiler_invocations)
        source = f"torch.profiler (CUPTI): summed kernel durations, mean of {profiler_invocations} calls"
    except Exception as exc:  # the profiler is an extra; its failure must not fail the case
        note = f"kernel-only time unavailable: {type(exc).__name__}: {exc}"
        log.warning(note)
    return PairTiming(summarize(cand_us), summarize(base_us), cand_dev, base_dev, source, note, invocations)


def _single_call_ms(fn: Fn, inputs: Sequence[Any]) -> float:
    start = torch.cuda.Event(enable_timing=True)
    end = torch.cuda.Event(enable_timing=True)
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
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    n = len(input_sets)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for i in range(calls):
            fn(*input_sets[i % n])
        torch.cuda.synchronize()
    total = sum(e.time_range.elapsed_us() for e in prof.events() if e.device_type == DeviceType.CUDA)
    if total <= 0:
        raise RuntimeError("profiler recorded no kernels")
    return float(total) / calls


def measure_interpreter(candidate: Fn, baseline: Fn, input_sets: Sequence[Sequence[Any]], samples: int) -> PairTiming:
    """Wall-clock timing of single calls under the Triton interpreter. Labelled; never rewarded."""

    def wall(fn: Fn) -> list[float]:
        out = []
        for i in range(samples):
            t0 = time.perf_counter()
            fn(*input_sets[i % len(input_sets)])
            out.append((time.perf_counter() - t0) * 1e6)
        return out

    cand = wall(candidate)
    base = wall(baseline)
    return PairTiming(
        summarize(cand), summarize(base), None, None, None,
        note="Triton interpreter on CPU: wall-clock, not GPU time; never feeds a reward",
    )
