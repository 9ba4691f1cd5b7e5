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

Each implementation's sample is captured once in a CUDA graph and replayed between the events (measurement.replay):
launched one by one, consecutive calls sit 1.2-1.7 us apart on the H200 device, which put 20-40 us kernels 3-6% over
their CUPTI time; replayed, 0.26 us. The first replay is verified on fresh inputs before any sample. What cannot be
captured is timed with stream launches, and the report says which (Timing.sample_launch).

Launches are hidden: the GPU is held ahead of each sample's start event until the host has queued the sample's calls
(a wait kernel the host releases; a GPU sleep where that is unavailable), so the events time the calls back to back on
the device (measurement.launch_gate). On the H200 host a launch costs the CPU about as long as a 20-40 us kernel
runs, so ungated samples of such kernels timed the CPU: their medians moved with host jitter between processes and
exceeded the CUPTI kernel time. A few extra ungated samples per implementation
report the launch-inclusive latency alongside.

Integrity (kernelproof_core/integrity/audit.py supplies the auditor): every sample is followed by a whole-device
synchronize and one more event; a sample whose tail after the end event exceeds the calibrated limit is counted
(deferred_samples). Work outside the events, before the start (during the sleep) or after the end, on another
stream, is caught by comparing CUPTI kernel time with the event median (integrity.plausibility.check_timed_region).
Between samples, never inside them, the auditor checks the harness and, on
randomly chosen samples, refreshes the input set of the sample's last call and verifies that call's output. Timers
and the event class are bound when this module and measurement.sampler (the sample loop) are imported, before any
candidate code runs, so patching `time.perf_counter` or `torch.cuda.Event` afterwards cannot change a measurement
(and is reported as tampering).
"""

from __future__ import annotations

import logging
import math
import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch

from kernelproof_core.integrity.profiled import ProfilerGap, with_profile_retries
from kernelproof_core.measurement.clocks import (
    THROTTLE_CLOCK_FRACTION,
    ClockMonitor,
    ClockSummary,
    summarize_clocks,
)
from kernelproof_core.measurement.device_time import (
    Fn,
    kernel_time_us,
    kernel_times,
    single_call_ms,
    sync_gap_us,
    tail_gap_us,
)
from kernelproof_core.measurement.kept_outputs import kept_bytes_cap, kept_calls, output_bytes
from kernelproof_core.measurement.launch_gate import (
    cycles_per_us,
    gate_for,
    host_release,
    host_release_error,
    launch_inclusive,
)
from kernelproof_core.measurement.replay import capture_pair
from kernelproof_core.measurement.sampler import CudaSampler, SampleAuditor, verify_first_replay
from kernelproof_core.measurement.stats import summarize
from kernelproof_core.measurement.stopping import StoppedBy, StoppingRule, median_rse, stop_reason
from kernelproof_core.report.models import Distribution

if TYPE_CHECKING:
    from kernelproof_core.settings import Settings
    from kernelproof_core.tasks.base import Task

log = logging.getLogger(__name__)

_perf_counter = time.perf_counter
_synchronize = torch.cuda.synchronize
MAX_SYNC_GAP_US = 100.0  # a calibration above this is not trusted (something kept the device busy): nothing removed
DEFERRAL_MARGIN_US = 15.0  # see deferral_limit_us
GATE_PROBE_CALLS = 10  # calls of the gated probe sample that estimates device time per call


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
    candidate_launch_inclusive: Distribution | None = None  # per-call latency with the host's launch cost in it
    baseline_launch_inclusive: Distribution | None = None
    candidate_host_us: float | None = None  # median host time to queue one call (gated samples)
    baseline_host_us: float | None = None
    exposed_samples: int = 0  # candidate samples the GPU may have started before they were queued (launch_gate)
    deferred_samples: int = 0  # candidate samples with a long tail after the end event (diagnostic)
    launch_gate: str | None = None  # how launches were hidden: "host_release" or "sleep" (measurement.launch_gate)
    sample_launch: str | None = None  # "cuda_graph" (measurement.replay) or "stream"

    @property
    def candidate_rse(self) -> float | None:
        return finite_or_none(median_rse(self.candidate.samples))

    @property
    def baseline_rse(self) -> float | None:
        return finite_or_none(median_rse(self.baseline.samples))


def _median_or_none(values: list[float]) -> float | None:
    return float(statistics.median(values)) if values else None


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


def ring_input_sets(task: Task, first: Sequence[Any], case_bytes: int, settings: Settings) -> list[Sequence[Any]]:
    """The input sets a case's samples rotate through: `first`, then the task's ring variants of it (ring_size of
    them in all, from the settings' ring budget)."""
    n_sets = ring_size(case_bytes, settings.input_ring_min_bytes, settings.input_ring_max_sets,
                       settings.input_ring_max_bytes)
    return [first, *(task.ring_inputs(first, i + 1) for i in range(n_sets - 1))]


def deferral_limit_us(tail_us: float) -> float:
    """End-to-post-synchronize time above which work must have outlived the end event: the calibrated idle tail
    (device_time.tail_gap_us) twice over, plus a margin for host jitter."""
    return 2.0 * tail_us + DEFERRAL_MARGIN_US


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
    launch_inclusive_samples: int = 0,
    audit_set: Sequence[Any] | None = None,
    hold_for_host: bool = True,
    cuda_graphs: bool = True,
    ring_audits: bool = False,
    kept_outputs_max_bytes: int = 4 << 30,
) -> PairTiming:
    """Interleaved CUDA-event timing of candidate and baseline: device time per call, launches hidden.

    Each sample queues a hold (measurement.launch_gate: a wait kernel the host releases once it queued the whole
    sample, or with `hold_for_host` false or unavailable, a GPU sleep), its start event, its calls and its end event
    on the caller's stream, then synchronizes the whole device and records one more event: the end event times the calls
    back to back; a tail from end to that last event beyond the calibrated limit is counted as a diagnostic
    (PairTiming.deferred_samples), while work outside the events is caught by the caller's CUPTI comparison
    (integrity.plausibility.check_timed_region).
    `invocations` is an upper bound, applied to candidate and baseline separately: where a call would make a sample
    longer than `max_sample_ms`, that implementation makes fewer calls per sample (PairTiming.invocations and
    baseline_invocations say how many), so a 1 GB case costs seconds, not minutes, and still gets every sample.
    With an auditor, each candidate sample makes a random number of calls up to its bound; each per-call time divides
    by its count. Without `stopping`, exactly `samples` pairs are taken; with it, batches until `stop_reason` says
    stop. `clocks` (opened by the caller for the whole case) flags throttled pairs; without it nothing is discarded.
    `audit_set`: an input set outside the ring, used only by the last call of an audited sample; without it the
    audited call uses its ring set, which other calls of a sample may share (an unwritten output could then hold an
    earlier call's right answer). `launch_inclusive_samples` more samples per implementation, ungated, measure what
    a caller pays per call with the host's launch cost in it (reported, never rewarded). `ring_audits`: every
    candidate output of a sample is kept and audited samples also verify a random ring call (integrity.audit); the
    baseline's outputs and both kernel-only passes are kept alike (measurement.kept_outputs: a reused output block is
    written into L2), and each implementation's calls a sample are capped at `kept_outputs_max_bytes` of outputs (at
    most an eighth of the GPU's memory: kept_outputs.kept_bytes_cap).
    """
    device = torch.device("cuda")
    flush = torch.empty(l2_flush_bytes, dtype=torch.uint8, device=device)
    host: dict[bool, list[float]] = {True: [], False: []}  # host microseconds to queue one call
    n = len(input_sets)
    for i in range(warmups):
        for is_candidate, fn in ((True, candidate), (False, baseline)):
            t0 = _perf_counter()
            fn(*input_sets[i % n])
            host[is_candidate].append((_perf_counter() - t0) * 1e6)
    _synchronize()
    if auditor is not None:
        auditor.after_sample(None, input_sets[0], audited=False)
    counts = (calls_per_sample(single_call_ms(candidate, input_sets[0]), invocations, max_sample_ms),
              calls_per_sample(single_call_ms(baseline, input_sets[0]), invocations, max_sample_ms))
    # With ring audits every output of a sample is kept, the baseline's too: timed alike (measurement.kept_outputs).
    keep_bytes = 0
    if ring_audits:  # graphs hold both sides' outputs at once: within a share of the GPU's memory
        keep_bytes = kept_bytes_cap(kept_outputs_max_bytes, torch.cuda.get_device_properties(device).total_memory)
        counts = (kept_calls(counts[0], output_bytes(candidate(*input_sets[0])), keep_bytes),
                  kept_calls(counts[1], output_bytes(baseline(*input_sets[0])), keep_bytes))
    graphs, graph_note = None, None
    if cuda_graphs:  # each sample replays one captured device program (measurement.replay)
        cand_graph, base_graph, graph_note = capture_pair(candidate, baseline, input_sets, counts, audit_set,
                                                          keep_outputs=ring_audits)
        if cand_graph is not None and base_graph is not None:
            graphs = (cand_graph, base_graph)
            if auditor is not None:
                verify_first_replay(cand_graph, auditor)
    gap_us = sync_gap_us()
    removed_us = gap_us if gap_us <= MAX_SYNC_GAP_US else 0.0
    release = host_release() if hold_for_host else None
    cycles = cycles_per_us() if release is None else 0.0  # only the sleep gate needs its clock calibrated
    gates = tuple(
        gate_for(fn, input_sets[0], min(count, GATE_PROBE_CALLS), cycles, _median_or_none(host[is_candidate]) or 0.0,
                 release)
        for is_candidate, fn, count in ((True, candidate, counts[0]), (False, baseline, counts[1]))
    )

    monitor = clocks if clocks is not None else ClockMonitor()
    sampler = CudaSampler(candidate, baseline, input_sets, flush, counts, (gates[0], gates[1]),
                           deferral_limit_us(tail_gap_us()), auditor, monitor, throttle_fraction, audit_set, graphs,
                           ring_audits)
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
    if graph_note is not None:
        notes.append(f"timed with stream launches: {graph_note}")
    if hold_for_host and release is None:
        notes.append(f"launches hidden by a GPU sleep: the host-release gate is unavailable ({host_release_error()})")
    cand_us, base_us = sampler.cand_us, sampler.base_us
    if not cand_us:  # every pair throttled: report them, flagged, rather than nothing
        cand_us, base_us = [c for c, _ in sampler.discarded], [b for _, b in sampler.discarded]
        notes.append("every sample pair was taken while the GPU throttled: none discarded")

    inclusive = None
    if launch_inclusive_samples > 0:
        inclusive = tuple(
            summarize(launch_inclusive(fn, input_sets, flush, count, launch_inclusive_samples, removed_us))
            for fn, count in ((candidate, counts[0]), (baseline, counts[1]))
        )
    cand_dev, base_dev, source, kernels = None, None, None, None
    try:
        # A record that lost a canary (ProfilerGap) is retried, then propagates (infra_error): the integrity checks
        # read this record (kernels outside the timed region, foreign kernels), so a partial one cannot pass.
        cand_pass = with_profile_retries(lambda: kernel_times(candidate, input_sets, profiler_invocations, keep_bytes),
                                         "kernel-only pass of the candidate")
        kernels, cand_dev = cand_pass.per_kernel, cand_pass.busy_us
        base_dev = with_profile_retries(
            lambda: kernel_times(baseline, input_sets, profiler_invocations, keep_bytes),
            "kernel-only pass of the baseline").busy_us
        source = (f"torch.profiler (CUPTI): kernel busy time (each stream's kernels, overlaps counted once), mean of "
                  f"{profiler_invocations} calls")
    except ProfilerGap:
        raise
    except Exception as exc:  # otherwise the profiler is an extra; its failure must not fail the case
        notes.append(f"kernel-only time unavailable: {type(exc).__name__}: {exc}")
        log.warning(notes[-1])
    return PairTiming(
        summarize(cand_us), summarize(base_us), cand_dev, base_dev, source, "; ".join(notes) or None, counts[0],
        baseline_invocations=counts[1],
        candidate_kernels=kernels, sync_gap_us=removed_us, audited_samples=sampler.audited, stopped_by=stopped_by,
        samples_taken=sampler.taken,
        candidate_launch_inclusive=inclusive[0] if inclusive else None,
        baseline_launch_inclusive=inclusive[1] if inclusive else None,
        candidate_host_us=_median_or_none(sampler.host_us[True]),
        baseline_host_us=_median_or_none(sampler.host_us[False]),
        exposed_samples=sampler.exposed, deferred_samples=sampler.deferred,
        launch_gate="host_release" if release is not None else "sleep",
        sample_launch="cuda_graph" if graphs is not None else "stream",
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


__all__ = ["PairTiming", "kernel_time_us", "measure_cuda", "measure_interpreter", "ring_input_sets", "ring_size",
           "sync_gap_us"]
