"""Hiding the host's launch cost from device-time samples.

On the H200 host a Triton launch costs the CPU 15-27 us and a built-in wrapper call 21-41 us
(evidence/h200/2026-11-30_kernels_throughput/), so a sample of back-to-back 20-40 us kernels measures the CPU, not the
GPU: its median moves with host jitter from process to process and exceeds the CUPTI kernel time. Before each
sample's start event the stream gets a GPU sleep long enough for the host to queue the sample's calls behind it, so
the timed region holds the calls back to back, as a GPU sees them inside a model or a CUDA graph (nvbench's blocking
kernel does the same). The sleep is a precompiled torch kernel: nothing to compile per process, and it cannot
deadlock with a candidate that synchronizes the host (the sleep simply ends; the sample is then `exposed`).

Sizing: the GPU starves only if queueing outruns it, i.e. if host time for k calls exceeds sleep + k * device time.
The sleep therefore covers max(0, k * (host - device)) per call estimates, with a factor and a margin. After the batch
is synchronized each sample is checked: host queueing time > sleep + measured device time marks it exposed (its time
then includes some host time: it can only be slower, never faster). Estimates follow the latest samples.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

_sleep = torch.cuda._sleep  # bound at import, before candidate code runs (like the timers in measurement.timing)
_Event = torch.cuda.Event
_synchronize = torch.cuda.synchronize
_perf_counter = time.perf_counter
Fn = Callable[..., Any]

SLEEP_FACTOR = 1.25  # sleep this multiple of the predicted queueing deficit ...
SLEEP_MARGIN_US = 20.0  # ... plus this; the first call of a sample must be queued before the sleep ends
SLEEP_CAP_US = 50_000.0  # never sleep longer (a host this slow makes the sample exposed, and it is reported)
HOST_WINDOW = 8  # host cost per call: the largest of the last this many samples
CALIBRATION_CYCLES = 1_000_000
DEVICE_ESTIMATE_SHARE = 0.9  # size sleeps for a device 10% faster than probed: errs towards a longer sleep


def cycles_per_us() -> float:
    """GPU clock cycles per microsecond of `torch.cuda._sleep`, measured with events (about 1 ms)."""
    start, end = _Event(enable_timing=True), _Event(enable_timing=True)
    _sleep(CALIBRATION_CYCLES // 10)  # first use: module load outside the measured sleep
    start.record()
    _sleep(CALIBRATION_CYCLES)
    end.record()
    end.synchronize()
    us = float(start.elapsed_time(end)) * 1000.0
    return CALIBRATION_CYCLES / us if us > 0 else 1000.0


def sleep_us_for(calls: int, host_us_per_call: float, device_us_per_call: float) -> float:
    """GPU sleep that lets the host queue `calls` calls before the GPU reaches them (see the module docstring)."""
    deficit = max(0.0, calls * (host_us_per_call - device_us_per_call))
    return min(SLEEP_CAP_US, SLEEP_FACTOR * deficit + SLEEP_MARGIN_US)


def exposed(host_us: float, sleep_us: float, device_us: float) -> bool:
    """Whether the GPU may have waited for the host inside the timed region: queueing outlasted sleep plus work."""
    return host_us > sleep_us + device_us


@dataclass(slots=True)
class GateReading:
    """What one gated sample queued: host microseconds to queue its calls, and the sleep in front of them."""

    host_us: float
    sleep_us: float


class LaunchGate:
    """Per-implementation sleep sizing. `open` queues the sleep; `closed` records the host queueing time."""

    def __init__(self, cycles_per_us: float, host_us_per_call: float, device_us_per_call: float) -> None:
        self.cycles_per_us = cycles_per_us
        self.device_us_per_call = device_us_per_call
        self.recent: deque[float] = deque([host_us_per_call], maxlen=HOST_WINDOW)
        self._began = 0.0
        self._sleep_us = 0.0

    @property
    def host_us_per_call(self) -> float:
        return max(self.recent)

    def open(self, calls: int) -> None:
        """Queue the sleep for a sample of `calls` calls; the caller records the start event next."""
        self._sleep_us = sleep_us_for(calls, self.host_us_per_call, self.device_us_per_call)
        _sleep(int(self._sleep_us * self.cycles_per_us))
        self._began = _perf_counter()

    def closed(self, calls: int) -> GateReading:
        """After the sample's end event was queued."""
        host_us = (_perf_counter() - self._began) * 1e6
        self.recent.append(host_us / max(1, calls))
        return GateReading(host_us, self._sleep_us)


def launch_inclusive(fn: Fn, input_sets: Sequence[Sequence[Any]], flush: torch.Tensor, calls: int, samples: int,
                     gap_us: float) -> list[float]:
    """Per-call latency with the host's launch cost in it: no sleep, end event after a whole-device synchronize,
    the calibrated synchronize gap removed. What a caller that waits for each result pays."""
    n = len(input_sets)
    out = []
    for s in range(samples):
        flush.zero_()
        start, end = _Event(enable_timing=True), _Event(enable_timing=True)
        start.record()
        for k in range(calls):
            fn(*input_sets[(s * calls + k) % n])
        _synchronize()
        end.record()
        end.synchronize()
        out.append(max(0.0, float(start.elapsed_time(end)) * 1000.0 - gap_us) / calls)
    return out


def gate_for(fn: Fn, inputs: Sequence[Any], calls: int, cycles: float, host_us: float) -> LaunchGate:
    """A gate sized from one generously gated probe sample of `calls` calls (it measures the device time)."""
    gate = LaunchGate(cycles, host_us, 0.0)
    start, end = _Event(enable_timing=True), _Event(enable_timing=True)
    gate.open(calls)
    start.record()
    for _ in range(calls):
        fn(*inputs)
    end.record()
    reading = gate.closed(calls)
    end.synchronize()
    device_us = float(start.elapsed_time(end)) * 1000.0
    # An exposed probe timed the host too: assume a device with no time of its own (the longest sleeps).
    if not exposed(reading.host_us, reading.sleep_us, device_us):
        gate.device_us_per_call = DEVICE_ESTIMATE_SHARE * device_us / calls
    return gate


__all__ = ["GateReading", "LaunchGate", "cycles_per_us", "exposed", "gate_for", "launch_inclusive", "sleep_us_for"]
