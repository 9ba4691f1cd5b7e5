"""Hiding the host's launch cost from device-time samples.

On the H200 host a Triton launch costs the CPU 15-27 us and a built-in wrapper call 21-41 us
(evidence/h200/2026-11-30_kernels_throughput/), so a sample of back-to-back 20-40 us kernels measures the CPU, not the
GPU: its median moves with host jitter from process to process and exceeds the CUPTI kernel time. So the GPU is held
before each sample's start event until the host has queued the sample's calls, and the events time the calls back to
back, as a GPU sees them inside a model or a CUDA graph. Two ways to hold it:

* Host release (the default on CUDA, `HostRelease`): a one-thread Triton kernel spins on a counter in pinned host
  memory until the host, having queued every call and the end event, writes the sample's number there (nvbench's
  blocking kernel works this way). Nothing is estimated: the whole sample is queued before the GPU starts it,
  whatever the host's speed does meanwhile. The spin has a deadline (read from the GPU's global timer), so a
  candidate that synchronizes the host inside its call, or a launch queue too short for the sample, cannot deadlock
  it: the kernel gives up, records that it did, and the sample is `exposed`.
* Sleep (the fallback when the wait kernel cannot be built): a precompiled `torch.cuda._sleep` sized from the host's
  recent cost per call. The GPU starves only if queueing outruns it, i.e. if host time for k calls exceeds sleep + k
  * device time, so the sleep covers max(0, k * (host - device)) with a factor and a margin; a sample whose host
  queueing outlasted sleep plus measured device time is `exposed`. Host jitter inside a sample can still open gaps
  that this test misses: with launch and kernel both near 30 us, samples of one process moved between two levels
  2-3% apart on the H200 (evidence/h200/2026-11-30_verification_kernels/2_repro/), which is why host release is
  the default.
An exposed sample's time includes some host time: it can only be slower, never faster.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
import triton
import triton.language as tl

log = logging.getLogger(__name__)

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
# Host release: the wait kernel gives up after this multiple of the host's predicted queueing time plus the floor,
# and never waits longer than the cap (a host that slow makes the sample exposed).
RELEASE_TIMEOUT_FACTOR = 4.0
RELEASE_TIMEOUT_FLOOR_US = 2_000.0
RELEASE_TIMEOUT_CAP_US = 200_000.0


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
    """What one gated sample queued: host microseconds to queue its calls, the sleep in front of them (sleep gate),
    and whether the host opened the gate (host release; set once the sample finished, None for the sleep gate)."""

    host_us: float
    sleep_us: float
    released: bool | None = None

    def exposed(self, device_us: float) -> bool:
        """Whether the GPU may have waited for the host inside the timed region."""
        if self.released is not None:
            return not self.released  # the deadline opened the gate, not the host: calls may still have been queueing
        return exposed(self.host_us, self.sleep_us, device_us)


@triton.jit
def _global_ns() -> tl.tensor:
    # The GPU's global nanosecond timer: unlike clock64 it does not depend on the SM clock.
    return tl.inline_asm_elementwise("mov.u64 $0, %globaltimer;", "=l", [], dtype=tl.int64, is_pure=False, pack=1)


@triton.jit(do_not_specialize=["target", "timeout_ns"])
def _wait_for_host(flag_ptr: tl.tensor, target: tl.tensor, timeout_ns: tl.tensor) -> None:
    # flag_ptr: two int32 in pinned host memory. [0] the last sample the host released, [1] written here: the target if
    # the host released it, -target if the deadline did. Volatile loads: every poll reads host memory again.
    began = _global_ns()
    seen = tl.load(flag_ptr, volatile=True)
    while (seen < target) & (_global_ns() - began < timeout_ns):
        seen = tl.load(flag_ptr, volatile=True)
    tl.store(flag_ptr + 1, tl.where(seen >= target, target, -target))


class HostRelease:
    """The pinned counter and the compiled wait kernel (see the module docstring).

    `prepare` builds and self-tests them once per process, in the trusted start-up before any candidate code (a
    failure leaves the sleep gate in charge, and says why). Then each sample costs one launch and two plain memory
    accesses on the host. One instance per process, created at import, so that preparing it changes no module
    attribute the tamper snapshot compares.
    """

    def __init__(self) -> None:
        self.error: str | None = None
        self._view: Any = None  # NumPy view of the pinned int32[2]: host reads and writes without torch ops
        self._flag: torch.Tensor | None = None
        self._target = 0

    @property
    def ready(self) -> bool:
        return self._flag is not None

    def prepare(self) -> bool:
        """Build (a compile: ~0.9 s of CPU for sm_90 without a warm Triton cache) and check both ways the gate opens."""
        if self.ready or self.error is not None:
            return self.ready
        try:
            if not torch.cuda.is_available():
                raise RuntimeError("no CUDA device")
            flag = torch.zeros(2, dtype=torch.int32, pin_memory=True)
            self._flag, self._view = flag, flag.numpy()
            self.hold(1_000_000.0)
            self.release()
            torch.cuda.synchronize()
            opened_by_host = self.released()
            self.hold(100.0)  # nobody releases this one: the deadline must open it
            torch.cuda.synchronize()
            if not opened_by_host or self.released():
                raise RuntimeError(f"self-test failed (released by host {opened_by_host}, by deadline "
                                   f"{not self.released()})")
        except Exception as exc:  # the sleep gate takes over; the reason is logged and reported
            self._flag = self._view = None
            self.error = f"{type(exc).__name__}: {exc}"
            log.warning("host-release launch gate unavailable, using the GPU sleep: %s", self.error)
            return False
        return True

    def hold(self, timeout_us: float) -> None:
        """Queue the wait for the next sample on the current stream; it gives up after `timeout_us`."""
        self._target += 1
        _wait_for_host[(1,)](self._flag, self._target, int(timeout_us * 1000.0), num_warps=1)

    def release(self) -> None:
        """Everything of the sample is queued: let the GPU start it."""
        self._view[0] = self._target

    def released(self) -> bool:
        """After the sample finished: whether the host, not the deadline, opened its gate."""
        return int(self._view[1]) == self._target


_HOST_RELEASE = HostRelease()


def host_release() -> HostRelease | None:
    """The process's host-release gate, prepared on first use (trusted start-up does it: integrity.run); None where
    it cannot work here (no CUDA, or its self-test failed: `host_release_error` says why)."""
    return _HOST_RELEASE if _HOST_RELEASE.prepare() else None


def host_release_error() -> str | None:
    return _HOST_RELEASE.error


class LaunchGate:
    """Per-implementation gate. `open` queues the hold (host release, or a sleep sized from the recent host cost);
    `closed` records the host queueing time and releases; `settled`, after the sample finished, says how it opened."""

    def __init__(self, cycles_per_us: float, host_us_per_call: float, device_us_per_call: float,
                 release: HostRelease | None = None) -> None:
        self.cycles_per_us = cycles_per_us
        self.device_us_per_call = device_us_per_call
        self.release = release
        self.recent: deque[float] = deque([host_us_per_call], maxlen=HOST_WINDOW)
        self._began = 0.0
        self._sleep_us = 0.0
        self._calls = 1

    @property
    def host_us_per_call(self) -> float:
        return max(self.recent)

    def open(self, calls: int) -> None:
        """Queue the hold for a sample of `calls` calls; the caller records the start event next."""
        if self.release is not None:
            self.release.hold(release_timeout_us(calls, self.host_us_per_call))
        else:
            self._sleep_us = sleep_us_for(calls, self.host_us_per_call, self.device_us_per_call)
            _sleep(int(self._sleep_us * self.cycles_per_us))
        self._began = _perf_counter()

    def closed(self, calls: int) -> GateReading:
        """After the sample's end event was queued."""
        host_us = (_perf_counter() - self._began) * 1e6
        if self.release is None:
            self.recent.append(host_us / max(1, calls))
            return GateReading(host_us, self._sleep_us)
        self.release.release()
        self._calls = calls
        return GateReading(host_us, 0.0)

    def settled(self, reading: GateReading) -> GateReading:
        """After the sample finished on the device: record whether the host opened the gate. Only samples the host
        released teach the deadline: a call that waits for the device (it synchronizes) keeps the host busy until
        the deadline whatever it is, and must not stretch the next one."""
        if self.release is not None:
            reading.released = self.release.released()
            if reading.released:
                self.recent.append(reading.host_us / max(1, self._calls))
        return reading


def release_timeout_us(calls: int, host_us_per_call: float) -> float:
    """How long the wait kernel holds the GPU at most: the host's predicted queueing time several times over."""
    return min(RELEASE_TIMEOUT_CAP_US, RELEASE_TIMEOUT_FACTOR * calls * host_us_per_call + RELEASE_TIMEOUT_FLOOR_US)


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


def gate_for(fn: Fn, inputs: Sequence[Any], calls: int, cycles: float, host_us: float,
             release: HostRelease | None = None) -> LaunchGate:
    """A gate for one implementation. The sleep gate is sized from one generously gated probe sample of `calls`
    calls (it measures the device time); host release needs no estimate but the host's cost per call."""
    gate = LaunchGate(cycles, host_us, 0.0, release)
    if release is not None:
        return gate
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


__all__ = ["GateReading", "HostRelease", "LaunchGate", "cycles_per_us", "exposed", "gate_for", "host_release",
           "host_release_error", "launch_inclusive", "release_timeout_us", "sleep_us_for"]
