"""Sizing of the GPU sleep that hides launch cost (measurement/launch_gate.py); the GPU side is in tests/gpu."""

from __future__ import annotations

import pytest
import torch

from kernelproof_core.measurement.launch_gate import (
    RELEASE_TIMEOUT_CAP_US,
    RELEASE_TIMEOUT_FLOOR_US,
    SLEEP_CAP_US,
    SLEEP_FACTOR,
    SLEEP_MARGIN_US,
    GateReading,
    LaunchGate,
    exposed,
    host_release,
    host_release_error,
    release_timeout_us,
    sleep_us_for,
)
from kernelproof_core.measurement.timing import deferral_limit_us


def test_sleep_covers_the_queueing_deficit() -> None:
    # 40 calls, host 25 us per call, device 5 us: the host falls 800 us behind over the sample.
    assert sleep_us_for(40, 25.0, 5.0) == pytest.approx(SLEEP_FACTOR * 800.0 + SLEEP_MARGIN_US)
    # A device slower than the host never starves after the first call: only the margin.
    assert sleep_us_for(40, 25.0, 260.0) == pytest.approx(SLEEP_MARGIN_US)
    assert sleep_us_for(10**6, 1000.0, 0.0) == SLEEP_CAP_US


def test_exposure_means_queueing_outlasted_sleep_plus_work() -> None:
    assert not exposed(host_us=900.0, sleep_us=1020.0, device_us=200.0)
    assert not exposed(host_us=1200.0, sleep_us=1020.0, device_us=200.0)
    assert exposed(host_us=1300.0, sleep_us=1020.0, device_us=200.0)


def test_gate_follows_the_slowest_recent_host() -> None:
    gate = LaunchGate(cycles_per_us=1980.0, host_us_per_call=20.0, device_us_per_call=2.0)
    assert gate.host_us_per_call == 20.0
    gate.recent.append(35.0)
    assert gate.host_us_per_call == 35.0  # one slow sample raises the next sleeps
    for _ in range(len(gate.recent) + 8):
        gate.recent.append(10.0)
    assert gate.host_us_per_call == 10.0  # and falls back once it leaves the window


def test_host_release_exposure_is_what_opened_the_gate() -> None:
    # Host release: the deadline opening the gate is the only exposure, whatever the times say.
    assert GateReading(host_us=5000.0, sleep_us=0.0, released=True).exposed(device_us=10.0) is False
    assert GateReading(host_us=10.0, sleep_us=0.0, released=False).exposed(device_us=5000.0) is True
    # Sleep gate (released unknown): the timing rule above.
    assert GateReading(host_us=1300.0, sleep_us=1020.0).exposed(device_us=200.0) is True


def test_release_deadline_outlasts_the_host_and_is_capped() -> None:
    assert release_timeout_us(0, 30.0) == RELEASE_TIMEOUT_FLOOR_US
    assert release_timeout_us(100, 30.0) > 100 * 30.0  # never before a host of the usual speed has queued it all
    assert release_timeout_us(10**6, 1000.0) == RELEASE_TIMEOUT_CAP_US


@pytest.mark.skipif(torch.cuda.is_available(), reason="the CUDA side is tests/gpu/test_gpu_launch_gate.py")
def test_without_cuda_the_sleep_gate_stays_in_charge_and_says_why() -> None:
    assert host_release() is None
    assert "CUDA" in (host_release_error() or "")


def test_deferral_limit_sits_above_the_synchronize_gap() -> None:
    for gap in (0.0, 15.0, 31.0):
        assert deferral_limit_us(gap) > 2 * gap


def test_kernel_time_beyond_the_events_is_tampering() -> None:
    from kernelproof_core.errors import CandidateFailure
    from kernelproof_core.integrity.plausibility import check_timed_region
    from kernelproof_core.verdicts import Verdict

    check_timed_region(event_median_us=30.0, kernel_us=26.0)  # honest: gaps make events longer
    check_timed_region(event_median_us=2.0, kernel_us=3.0)  # tiny: within the slack
    with pytest.raises(CandidateFailure) as failure:
        check_timed_region(event_median_us=30.0, kernel_us=120.0)  # work ran during the sleep on another stream
    assert failure.value.verdict is Verdict.TAMPERING
