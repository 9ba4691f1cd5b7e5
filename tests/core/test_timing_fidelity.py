"""Timing fidelity without a GPU: the throttling rule, NVML's graceful absence, speed of light, the CLI options and
presets for adaptive stopping, and what an interpreter run records. The CUDA paths are in tests/gpu."""

from __future__ import annotations

import argparse

import pytest
import torch

from kernelproof_core.campaign import Campaign, CandidateJob
from kernelproof_core.cli import build_parser
from kernelproof_core.cli.campaign_args import campaign_from_args
from kernelproof_core.environment import nvml_readings
from kernelproof_core.errors import UsageError
from kernelproof_core.measurement.clocks import ClockMonitor, SampleClock, summarize_clocks
from kernelproof_core.measurement.speed_of_light import REWARD_INPUT_CUDA, speed_of_light
from kernelproof_core.measurement.stopping import StoppingRule
from kernelproof_core.measurement.timing import calls_per_sample
from kernelproof_core.pipeline import verify_candidate
from kernelproof_core.presets import build_campaign
from kernelproof_core.tasks import CaseSet, get_task
from tests.candidates.rms_norm_variants import source


def test_a_sample_is_throttled_below_the_clock_fraction_or_on_a_slowdown_reason() -> None:
    assert not SampleClock(1980, 1980, False).throttled(1980)
    assert not SampleClock(1800, 1790, False).throttled(1980)  # 0.904 of the reference
    assert SampleClock(1980, 1700, False).throttled(1980)  # dropped during the sample
    assert SampleClock(1700, 1980, False).throttled(1980)
    assert SampleClock(1980, 1980, True).throttled(1980)  # NVML says thermal/power slowdown
    assert SampleClock(1700, 1700, False).throttled(1980, fraction=0.9)
    assert not SampleClock(1700, 1700, False).throttled(1980, fraction=0.8)
    assert not SampleClock(None, None, False).throttled(None)  # nothing known: nothing discarded


def test_clock_summary_covers_every_reading_and_says_when_nvml_was_missing() -> None:
    readings = [SampleClock(1980, 1965, False), SampleClock(1500, None, False), SampleClock(None, 1995, True)]
    s = summarize_clocks((41, 1980, 2619), readings, throttled=2, available=True)
    assert (s.sm_clock_mhz_min, s.sm_clock_mhz_max, s.throttled_samples) == (1500, 1995, 2)
    assert (s.temperature_c_start, s.sm_clock_mhz_start, s.mem_clock_mhz_start) == (41, 1980, 2619)
    missing = summarize_clocks((None, None, None), [SampleClock(None, None, False)], throttled=0, available=False)
    assert missing.throttled_samples is None and missing.sm_clock_mhz_min is None


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-GPU path")
def test_without_a_gpu_nvml_degrades_to_none() -> None:
    with ClockMonitor.open(0) as clocks:
        assert not clocks.available and clocks.note is not None
        assert clocks.sm_clock_mhz() is None and clocks.mem_clock_mhz() is None and clocks.temperature_c() is None
        assert clocks.slowdown() is False
    assert nvml_readings(0) == {}


def test_speed_of_light_and_launch_overhead() -> None:
    # 1 GB in 500 us of device time (events), 400 us of kernels, 600 us launch-inclusive, against a 4000 GB/s copy.
    sol = speed_of_light(10**9, 500.0, 400.0, 4000.0, 600.0)
    assert sol["achieved_bandwidth_gbps"] == pytest.approx(2000.0)
    assert sol["kernel_bandwidth_gbps"] == pytest.approx(2500.0)
    assert sol["speed_of_light_fraction"] == pytest.approx(0.5)
    assert sol["speed_of_light_fraction_kernel"] == pytest.approx(0.625)
    assert sol["launch_overhead_us"] == pytest.approx(200.0)  # launch-inclusive minus kernel time
    assert speed_of_light(10**9, 500.0, 400.0, 4000.0)["launch_overhead_us"] is None  # no ungated samples
    partial = speed_of_light(10**9, 500.0, None, None, 600.0)  # no profiler, no probe
    assert partial["achieved_bandwidth_gbps"] == pytest.approx(2000.0)
    assert partial["speed_of_light_fraction"] is None and partial["launch_overhead_us"] is None
    assert all(v is None for v in speed_of_light(10**9, None, 400.0, 4000.0, 600.0).values())  # interpreter


def test_rebase_takes_the_better_copy_reference_only() -> None:
    from kernelproof_core.measurement.speed_of_light import rebase

    sol = speed_of_light(10**9, 500.0, 400.0, 4000.0, 600.0)
    assert rebase(sol, 5000.0) == pytest.approx({"copy_bandwidth_gbps": 5000.0, "speed_of_light_fraction": 0.4,
                                                 "speed_of_light_fraction_kernel": 0.5})
    assert rebase(sol, 3900.0) == {} and rebase(sol, None) == {}  # a weaker measurement never replaces it
    assert rebase(speed_of_light(10**9, None, None, None), 5000.0) == {}  # interpreter: nothing to rebase
    no_kernel = rebase(speed_of_light(10**9, 500.0, None, 4000.0), 5000.0)
    assert no_kernel["speed_of_light_fraction_kernel"] is None


def _args(*argv: str) -> argparse.Namespace:
    return build_parser().parse_args(["verify", "--task", "rms_norm", "--candidate", "x.py",
                                      "--device", "interpreter", *argv])


def test_cli_builds_a_stopping_rule_from_its_options() -> None:
    campaign = campaign_from_args(_args("--target-rse", "0.005", "--max-measure-s", "10", "--min-samples", "40",
                                        "--max-samples", "800", "--min-measured-s", "0.5"))
    assert campaign.stopping == StoppingRule(target_rse=0.005, max_measure_s=10, min_samples=40, max_samples=800,
                                             min_measured_s=0.5)
    assert campaign_from_args(_args("--repeats", "7")).stopping is None  # the fixed count stays the default


def test_cli_refuses_stopping_options_without_a_target() -> None:
    with pytest.raises(UsageError, match="--max-measure-s need --target-rse"):
        campaign_from_args(_args("--max-measure-s", "10"))
    with pytest.raises(ValueError):
        campaign_from_args(_args("--target-rse", "2"))


def test_adaptive_preset_sets_a_rule_on_cuda_only_and_reuse_keys_are_stable() -> None:
    task = get_task("rms_norm")
    cuda = build_campaign(task, "cuda", "adaptive")
    assert cuda.stopping is not None and cuda.stopping.target_rse == 0.005 and cuda.stopping.max_measure_s == 10
    assert cuda.public_dump()["stopping"]["target_rse"] == 0.005
    assert build_campaign(task, "interpreter", "adaptive").stopping is None
    standard = build_campaign(task, "cuda", "standard")
    assert standard.stopping is None and "stopping" not in standard.public_dump()  # keys of stored verdicts hold
    assert Campaign.model_validate(cuda.public_dump()).stopping == cuda.stopping  # crosses into the sandbox


def test_interpreter_run_records_fixed_count_and_no_gpu_figures(device: str) -> None:
    campaign = Campaign(device=device, dtypes=["float32"], case_set=CaseSet.INTERPRETER,  # type: ignore[arg-type]
                        case_ids=["tail127"], samples=4, warmups=1, invocations_per_sample=2,
                        stopping=StoppingRule(target_rse=0.2, min_samples=5, max_measure_s=5))
    (r,) = verify_candidate(CandidateJob(task="rms_norm", source=source("honest")), campaign).cases
    t = r.timing
    assert t is not None, r.failure
    if device == "cuda":
        assert t.stopped_by in ("noise_target", "time_cap", "max_samples") and t.target_rse == 0.2
        assert t.reward_input == REWARD_INPUT_CUDA
        return
    assert t.kind == "interpreter_wall_clock" and t.stopped_by == "fixed_count" and t.target_rse is None
    assert t.samples == 4 and t.candidate.count == 4 and t.baseline.count == 4  # the rule does not apply here
    assert t.candidate_rse is not None and t.candidate_rse > 0 and t.baseline_rse is not None
    assert t.throttled_samples is None and t.sm_clock_mhz_min is None and t.temperature_c_start is None
    assert t.achieved_bandwidth_gbps is None and t.speed_of_light_fraction is None and t.launch_overhead_us is None
    assert t.min_bytes > 0
    assert t.reward_input.startswith("none")


def test_a_stopping_rule_is_an_override_kept_on_cuda_and_dropped_on_the_interpreter() -> None:
    task = get_task("rms_norm")
    rule = StoppingRule(target_rse=0.005, max_measure_s=5)
    cuda = build_campaign(task, "cuda", "quick", None, {"stopping": rule})
    assert cuda.stopping == rule and cuda.public_dump()["stopping"]["target_rse"] == 0.005
    assert Campaign.model_validate(cuda.public_dump()).stopping == rule  # what a worker rebuilds from the row
    assert build_campaign(task, "interpreter", "quick", None, {"stopping": rule}).stopping is None


def test_candidate_and_baseline_fit_their_own_calls_into_a_sample() -> None:
    """A 0.26 ms candidate next to a 3.3 ms eager baseline: the candidate keeps its planned 100 calls per 20 ms sample
    (the per-sample fixed cost spread over 76, not 6), the baseline drops to 6, nothing drops below one call."""
    assert calls_per_sample(0.26, 100, 20.0) == 76
    assert calls_per_sample(3.3, 100, 20.0) == 6
    assert calls_per_sample(0.01, 100, 20.0) == 100
    assert calls_per_sample(50.0, 100, 20.0) == 1
    assert calls_per_sample(0.0, 10, 20.0) == 10
