"""The launch gate on a real GPU (measurement/launch_gate.py): the host-release wait kernel holds a sample until the
host queued it (and a host that never releases cannot deadlock it), sleep calibration, and that work left on another
stream is counted, never free. These time stream launches (cuda_graphs=False): the gate is what they test.
Trusted functions call measure_cuda directly: the stream use that the static policy
forbids to candidates is what is being tested here. Skipped without CUDA."""

from __future__ import annotations

import time
from typing import Any

import pytest
import torch

from kernelproof_core.errors import CandidateFailure
from kernelproof_core.integrity.plausibility import check_timed_region
from kernelproof_core.measurement.launch_gate import cycles_per_us, host_release
from kernelproof_core.measurement.timing import measure_cuda

pytestmark = pytest.mark.gpu
requires_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")


def _measure(candidate: Any, baseline: Any, x: torch.Tensor) -> Any:
    return measure_cuda(candidate, baseline, [[x]], warmups=3, samples=12, invocations=1, l2_flush_bytes=64 << 20,
                        profiler_invocations=5, max_sample_ms=20.0, launch_inclusive_samples=3, cuda_graphs=False)


@requires_cuda
def test_sleep_calibration_reads_the_sm_clock() -> None:
    assert 500 < cycles_per_us() < 3000  # MHz: the H200 runs at up to 1980


@requires_cuda
def test_work_outliving_the_end_event_is_caught() -> None:
    side = torch.cuda.Stream()
    x = torch.randn(1 << 20, device="cuda")

    def deferring(a: torch.Tensor) -> torch.Tensor:
        out = a * 2
        with torch.cuda.stream(side):
            torch.cuda._sleep(4_000_000)  # ~2 ms: starts at once, still running when the end event passes
        return out

    pair = _measure(deferring, lambda a: a * 2, x)
    assert pair.deferred_samples >= 10, pair.deferred_samples  # the long tail is seen ...
    assert pair.candidate_device_us is not None and pair.candidate_device_us > 1000  # ... CUPTI sees the sleep ...
    with pytest.raises(CandidateFailure):  # ... so the case fails
        check_timed_region(pair.candidate.median, pair.candidate_device_us)


@requires_cuda
def test_work_hidden_in_the_sleep_fails_the_kernel_time_check() -> None:
    side = torch.cuda.Stream()
    x = torch.randn(1 << 20, device="cuda")

    def early(a: torch.Tensor) -> torch.Tensor:
        with torch.cuda.stream(side):
            torch.cuda._sleep(20_000)  # ~10 us on another stream: done while the caller's stream still sleeps
        return a * 2

    pair = _measure(early, lambda a: a * 2, x)
    assert pair.candidate_device_us is not None
    with pytest.raises(CandidateFailure):
        check_timed_region(pair.candidate.median, pair.candidate_device_us)


@requires_cuda
def test_host_release_gate_builds_and_is_used() -> None:
    assert host_release() is not None
    x = torch.randn(1 << 20, device="cuda")
    pair = _measure(lambda a: a * 2, lambda a: a * 3, x)
    assert pair.launch_gate == "host_release"
    assert pair.exposed_samples == 0


def _slow_host(a: torch.Tensor) -> torch.Tensor:
    """A tiny kernel behind 0.2-1 ms of jittery host work per call: the host is the bottleneck, by far."""
    until = time.perf_counter() + 2e-4 * (1 + (a.data_ptr() >> 8) % 5)
    while time.perf_counter() < until:
        pass
    return a * 2


@requires_cuda
def test_a_slow_jittery_host_does_not_reach_the_device_time() -> None:
    x = torch.randn(1 << 16, device="cuda")  # 256 KB: a few microseconds of kernel
    pair = measure_cuda(_slow_host, lambda a: a * 2, [[x]], warmups=3, samples=10, invocations=20,
                        l2_flush_bytes=64 << 20, profiler_invocations=5, max_sample_ms=50.0,
                        launch_inclusive_samples=3, cuda_graphs=False)
    assert pair.launch_gate == "host_release" and pair.exposed_samples == 0
    assert pair.candidate_launch_inclusive is not None and pair.candidate_launch_inclusive.median > 150.0
    # Held until all 20 calls were queued, the GPU runs them back to back: microseconds, not the host's 200+ us.
    assert pair.candidate.median < 25.0, pair.candidate.median


@requires_cuda
def test_a_call_that_waits_for_the_device_ends_the_hold_by_its_deadline() -> None:
    x = torch.randn(1 << 16, device="cuda")

    def synchronizing(a: torch.Tensor) -> torch.Tensor:
        out = a * 2
        torch.cuda.synchronize()  # waits for the held stream: only the wait kernel's deadline can end this
        return out

    began = time.perf_counter()
    pair = measure_cuda(synchronizing, lambda a: a * 2, [[x]], warmups=2, samples=4, invocations=3,
                        l2_flush_bytes=64 << 20, profiler_invocations=3, max_sample_ms=20.0, cuda_graphs=False)
    assert pair.exposed_samples == 4  # every sample: the deadline, not the host, opened the gate
    assert time.perf_counter() - began < 30.0  # no deadlock: each hold gave up after its deadline
