"""Device-side helpers of CUDA timing: the synchronize-gap calibration, a single-call probe and kernel-only time.

Kernel-only device time comes from torch.profiler (CUPTI) over a separate traced pass of the same calls. Timers and
the event class are bound when this module is imported, before any candidate code runs (see measurement.timing).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from kernelproof_core.integrity.profiled import ProfiledCall, require_canary
from kernelproof_core.measurement.kept_outputs import OutputWindow

Fn = Callable[..., Any]
_Event = torch.cuda.Event
_synchronize = torch.cuda.synchronize
SYNC_GAP_SAMPLES = 20


def _idle_gaps_us(samples: int, spin: bool) -> list[float]:
    """Sorted GPU times from a start event to an end event recorded right after a whole-device synchronize, on an
    idle device; with `spin`, the host first spins until it has seen the start event complete."""
    gaps = []
    for _ in range(samples):
        start = _Event(enable_timing=True)
        end = _Event(enable_timing=True)
        start.record()
        while spin and not start.query():
            pass
        _synchronize()
        end.record()
        end.synchronize()
        gaps.append(start.elapsed_time(end) * 1000.0)
    return sorted(gaps)


def sync_gap_us(samples: int = SYNC_GAP_SAMPLES) -> float:
    """Median GPU time between a start event and an end event recorded right after a whole-device synchronize on an
    idle device: the constant that ending every sample with a synchronize adds (host wake-up plus event launch)."""
    gaps = _idle_gaps_us(samples, spin=False)
    return float(gaps[len(gaps) // 2])


def tail_gap_us(samples: int = SYNC_GAP_SAMPLES) -> float:
    """On an idle device: from an event the host has seen complete (spinning on its query) to an event recorded
    after a whole-device synchronize. The 90th percentile: the tail an honest sample shows after its end event
    (measurement.timing's deferral diagnostic), without the blocking wake-up that makes a plain synchronize's gap
    vary."""
    gaps = _idle_gaps_us(samples, spin=True)
    return float(gaps[(len(gaps) * 9) // 10])


def single_call_ms(fn: Fn, inputs: Sequence[Any]) -> float:
    start = _Event(enable_timing=True)
    end = _Event(enable_timing=True)
    start.record()
    fn(*inputs)
    end.record()
    end.synchronize()
    return float(start.elapsed_time(end))


@dataclass(frozen=True, slots=True)
class KernelTimes:
    """A kernel-only pass per call (microseconds): each kernel name's summed durations, and the time the GPU was busy
    with them (per stream, overlaps counted once: integrity.profiled.covered_us; summed over streams)."""

    per_kernel: dict[str, float]
    busy_us: float


def kernel_time_us(fn: Fn, input_sets: Sequence[Sequence[Any]], calls: int) -> float:
    """Mean GPU busy time per call (microseconds) over `calls` traced calls.

    Only kernels launched inside the traced region count (the L2 flush is outside it), so this is the device time the
    call's kernels took, without launch gaps.
    """
    return kernel_times(fn, input_sets, calls).busy_us


def kernel_times(fn: Fn, input_sets: Sequence[Sequence[Any]], calls: int, keep_bytes: int = 0) -> KernelTimes:
    """GPU time per call of each kernel name, and busy time (microseconds), over `calls` traced calls. The traced
    region is bracketed by the harness's canary kernels (integrity.profiled): a record that lost activity (a session
    ended or restarted during the calls, or cut short) would read low and hide kernels from the checks that read it,
    so it is a ProfilerGap (an infrastructure fault; callers retry), never a time. `keep_bytes`: the latest outputs
    are kept up to that many bytes (measurement.kept_outputs; ring audits), so calls write fresh memory as in the
    samples."""
    n = len(input_sets)
    window = OutputWindow(keep_bytes)
    _synchronize()
    profiled = ProfiledCall(torch.device("cuda", torch.cuda.current_device()))
    profiled.start()
    try:
        for i in range(calls):
            window.add(fn(*input_sets[i % n]))
        _synchronize()
    finally:
        window.clear()
        record = profiled.stop(canary=True)
    require_canary(record)
    if sum(record.kernel_us.values()) <= 0:
        raise RuntimeError("profiler recorded no kernels")
    return KernelTimes({name: us / calls for name, us in record.kernel_us.items()}, record.busy_us / calls)
