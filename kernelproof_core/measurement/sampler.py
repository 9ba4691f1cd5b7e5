"""Interleaved, gated CUDA-event samples of a candidate and its baseline (measure_cuda's inner loop, see
measurement.timing): the L2 flushed before each, the SM clock read around it, the GPU held until the host has queued
its calls, a whole-device synchronize and a tail event after it; pairs taken while the clock was throttled are set
aside. The event class and synchronize are bound at import, before any candidate code runs.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import torch

from kernelproof_core.measurement.clocks import ClockMonitor, SampleClock
from kernelproof_core.measurement.device_time import Fn
from kernelproof_core.measurement.launch_gate import GateReading, LaunchGate
from kernelproof_core.measurement.replay import CapturedSample

_Event = torch.cuda.Event
_synchronize = torch.cuda.synchronize


class SampleAuditor(Protocol):
    """Checks between samples (see kernelproof_core.integrity.audit.SampleAuditor)."""

    def calls(self, sample: int, invocations: int) -> int: ...

    def audit(self, sample: int) -> bool: ...

    def refresh(self, inputs: Sequence[Any]) -> None: ...

    def pick_call(self, calls: int) -> int: ...

    def verify_ring(self, outs: Sequence[Any], call: int, inputs: Sequence[Any]) -> None: ...

    def before_flush(self) -> None: ...

    def after_sample(self, out: Any, inputs: Sequence[Any], audited: bool) -> None: ...


@dataclass(frozen=True, slots=True)
class Sample:
    start: Any
    end: Any
    after: Any  # recorded after the whole-device synchronize that follows the end event
    calls: int
    clock: SampleClock
    gate: GateReading


class CudaSampler:
    """Takes interleaved gated sample pairs and keeps the unthrottled ones (per-call device microseconds)."""

    def __init__(self, candidate: Fn, baseline: Fn, input_sets: Sequence[Sequence[Any]], flush: torch.Tensor,
                 invocations: tuple[int, int], gates: tuple[LaunchGate, LaunchGate], tail_limit_us: float,
                 auditor: SampleAuditor | None, clocks: ClockMonitor, throttle_fraction: float,
                 audit_set: Sequence[Any] | None = None,
                 graphs: tuple[CapturedSample, CapturedSample] | None = None, ring_audits: bool = False) -> None:
        self.candidate, self.baseline, self.input_sets = candidate, baseline, input_sets
        self.audit_set, self.ring_audits = audit_set, ring_audits
        self.graphs = {True: graphs[0], False: graphs[1]} if graphs is not None else None
        self.throttle_fraction = throttle_fraction
        self.flush, self.tail_limit_us = flush, tail_limit_us
        self.invocations, self.baseline_invocations = invocations
        self.gates = {True: gates[0], False: gates[1]}
        self.auditor, self.clocks = auditor, clocks
        self.reference_mhz = clocks.sm_clock_mhz()  # right after the warm-ups: the clock under load
        self.start = (clocks.temperature_c(), self.reference_mhz, clocks.mem_clock_mhz())
        self.taken = self.audited = self.throttled = self.exposed = self.deferred = 0
        self.measured_s = 0.0
        self.cand_us: list[float] = []
        self.base_us: list[float] = []
        self.host_us: dict[bool, list[float]] = {True: [], False: []}
        self.discarded: list[tuple[float, float]] = []
        self.readings: list[SampleClock] = []

    def _one(self, fn: Fn, start_index: int, count: int, audited: Sequence[Any] | None,
             ring: Sequence[Any] | None = None, keep: bool = False) -> tuple[Sample, Any, list[Any]]:
        """One gated sample of `count` calls; with `audited`, the last call runs on that set, refreshed first; with
        `ring`, that ring set is refreshed too (a ring audit); with `keep`, every call's output is returned as well.
        A captured sample replays its graph instead (its own count and last set: see `last_inputs`)."""
        n = len(self.input_sets)
        graph = self.graphs[fn is self.candidate] if self.graphs is not None else None
        if graph is not None:
            count = graph.calls
        if self.auditor is not None:
            for refreshed in (ring, audited):
                if refreshed is not None:
                    self.auditor.refresh(refreshed)
            self.auditor.before_flush()
        self.flush.zero_()  # evicts L2; queued before the start event, so outside the timed region
        before = self.clocks.sm_clock_mhz()  # host-side, before the start event is queued
        start = _Event(enable_timing=True)
        end = _Event(enable_timing=True)
        after = _Event(enable_timing=True)
        gate = self.gates[fn is self.candidate]
        out = None
        outs: list[Any] = []  # every output, kept (ring audits): none of them can be handed out again meanwhile
        gate.open(count)  # the GPU is held: the calls below queue up behind it (measurement.launch_gate)
        start.record()
        if graph is not None:
            graph.replay()  # no candidate code runs here: the device program captured once (measurement.replay)
            out = graph.out
            outs = list(graph.outs)
        else:
            for k in range(count):
                out = fn(*(audited if audited is not None and k == count - 1
                           else self.input_sets[(start_index + k) % n]))
                if keep:
                    outs.append(out)
        end.record()  # on the caller's stream: the calls back to back, without the host's launch cost
        reading = gate.closed(count)
        while not end.query():  # spin, not a blocking wait: the host sees the end at once, so the tail is tight
            pass
        _synchronize()  # the whole device: work left on any other stream ends before `after` (the tail diagnostic)
        after.record()
        reading = gate.settled(reading)  # the sample is done: did the host or the deadline open its gate?
        clock = SampleClock(before, self.clocks.sm_clock_mhz(), self.clocks.slowdown())  # after the bracket
        self.readings.append(clock)
        return Sample(start, end, after, count, clock, reading), out, outs

    def _ring_call(self, sample: int, count: int) -> tuple[int | None, Sequence[Any] | None]:
        """A ring audit's call and the ring set it reads: one of the sample's calls on a ring set (not the last
        where that reads the audit set), drawn by the auditor."""
        if not self.ring_audits or self.auditor is None:
            return None, None
        graph = self.graphs[True] if self.graphs is not None else None
        if graph is not None:
            eligible = [k for k, index in enumerate(graph.sets) if index >= 0]
        else:
            eligible = list(range(count - 1 if self.audit_set is not None else count))
        if not eligible:
            return None, None
        call = eligible[self.auditor.pick_call(len(eligible))]
        index = graph.sets[call] if graph is not None else (sample * self.invocations + call) % len(self.input_sets)
        return call, self.input_sets[index]

    def batch(self, pairs: int) -> None:
        """Take `pairs` sample pairs, then sort them into kept and throttled."""
        pending: list[tuple[Sample, Sample]] = []
        auditor, n = self.auditor, len(self.input_sets)
        for _ in range(pairs):
            s = self.taken
            graph = self.graphs[True] if self.graphs is not None else None
            # A replayed graph makes the calls it captured; random counts foil host code, which does not run then.
            count = self.invocations if graph is not None or auditor is None else auditor.calls(s, self.invocations)
            check = auditor is not None and auditor.audit(s)
            if graph is not None:  # the graph's last call reads the audit set (or, without one, its ring set)
                last_set = graph.last_inputs
                audited = last_set if check else None
            else:
                # The audited call's set: one no other call of the sample computes, so no earlier output of the
                # sample (say in a block the allocator hands out again) can pass for the audited call's (audit_set).
                last_set = self.input_sets[(s * self.invocations + count - 1) % n]
                audited = (self.audit_set if self.audit_set is not None else last_set) if check else None
            ring_call, ring_set = self._ring_call(s, count) if check else (None, None)
            got: dict[bool, Sample] = {}
            for fn in (self.candidate, self.baseline) if s % 2 == 0 else (self.baseline, self.candidate):
                is_candidate = fn is self.candidate
                if is_candidate:
                    sample, out, outs = self._one(fn, s * self.invocations, count, audited, ring_set,
                                                  self.ring_audits)
                else:
                    # kept as the candidate's are (ring audits), so the pair is timed alike: kept_outputs
                    sample, out, outs = self._one(fn, s * self.baseline_invocations, self.baseline_invocations, None,
                                                  keep=self.ring_audits)
                got[is_candidate] = sample
                if is_candidate and auditor is not None:
                    if ring_call is not None and ring_set is not None:
                        auditor.verify_ring(outs, ring_call, ring_set)
                    audited_inputs = audited if audited is not None else last_set
                    auditor.after_sample(out, audited_inputs, audited=check)
                    self.audited += int(check)
                del out, outs
            pending.append((got[True], got[False]))
            self.taken += 1
        _synchronize()
        for cand, base in pending:
            pair = (self._per_call_us(cand, True), self._per_call_us(base, False))
            if any(x.clock.throttled(self.reference_mhz, self.throttle_fraction) for x in (cand, base)):
                self.throttled += 1
                self.discarded.append(pair)
            else:
                self.cand_us.append(pair[0])
                self.base_us.append(pair[1])
                self.measured_s += (pair[0] * cand.calls + pair[1] * base.calls) / 1e6

    def _per_call_us(self, sample: Sample, is_candidate: bool) -> float:
        """Device time per call: start to end event. A tail from the end event to the post-synchronize event beyond
        the calibrated limit is counted (deferred_samples) but not added: on the H200 host wake-ups alone exceed it
        in some long samples, so adding it inflated honest medians by up to 2%; work that really outlived the end
        event shows as kernel time beyond the events (integrity.plausibility.check_timed_region)."""
        us = float(sample.start.elapsed_time(sample.end)) * 1000.0
        tail_us = float(sample.end.elapsed_time(sample.after)) * 1000.0
        if tail_us > self.tail_limit_us:
            self.deferred += int(is_candidate)
        self.host_us[is_candidate].append(sample.gate.host_us / sample.calls)
        if sample.gate.exposed(us):
            self.exposed += int(is_candidate)
        return us / sample.calls


def verify_first_replay(graph: CapturedSample, auditor: SampleAuditor) -> None:
    """The captured program computes the right output for fresh inputs, before any sample: the candidate's host
    code ran during the capture, which it can detect, so what the gates saw proves nothing about the graph."""
    inputs = graph.last_inputs
    auditor.refresh(inputs)
    graph.replay()
    _synchronize()
    auditor.after_sample(graph.out, inputs, audited=True)
