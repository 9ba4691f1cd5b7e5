"""The launch gate on a real GPU (measurement/launch_gate.py): sleep calibration, and that work left on another
stream is counted, never free. Trusted functions call measure_cuda directly: the stream use that the static policy
forbids to candidates is what is being tested here. Skipped without CUDA."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from kernelproof_core.errors import CandidateFailure
from kernelproof_core.integrity.plausibility import check_timed_region
from kernelproof_core.measurement.launch_gate import cycles_per_us
from kernelproof_core.measurement.timing import measure_cuda

pytestmark = pytest.mark.gpu
requires_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")


def _measure(candidate: Any, baseline: Any, x: torch.Tensor) -> Any:
    return measure_cuda(candidate, baseline, [[x]], warmups=3, samples=12, invocations=1, l2_flush_bytes=64 << 20,
                        profiler_invocations=5, max_sample_ms=20.0, launch_inclusive_samples=3)


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
