"""The JSON report: validates against the committed JSON Schema, round-trips, and drives the Markdown."""

from __future__ import annotations

import json
import math

import jsonschema
import pytest

from kernelproof_core.campaign import Campaign, CandidateJob
from kernelproof_core.report.markdown import render_markdown
from kernelproof_core.report.models import SCHEMA_VERSION, Report
from kernelproof_core.report.schema import committed_schema, generate_schema
from kernelproof_core.tasks import CaseSet
from kernelproof_core.verdicts import Verdict
from kernelproof_core.verify import InProcessExecutor, run_verification
from tests.candidates.rms_norm_variants import source


@pytest.fixture(scope="module")
def mixed_report(device: str) -> Report:
    """One run with a passing candidate and a failing one (NaN output: infinite error metrics)."""
    campaign = Campaign(device=device, dtypes=["bfloat16"], case_set=CaseSet.INTERPRETER,  # type: ignore[arg-type]
                        case_ids=["tail127", "n1"], samples=2, invocations_per_sample=2, warmups=1)
    jobs = [CandidateJob(task="rms_norm", source=source("honest")),
            CandidateJob(task="rms_norm", source=source("non_finite"), filename="bad.py")]
    return run_verification(jobs, campaign, InProcessExecutor())


def test_committed_schema_is_current() -> None:
    assert committed_schema() == json.loads(json.dumps(generate_schema())), (
        "report models changed: run `python -m kernelproof_core.report.schema --write`"
    )


def test_report_validates_and_round_trips(mixed_report: Report) -> None:
    text = mixed_report.model_dump_json()
    doc = json.loads(text)  # strict JSON: no bare Infinity/NaN
    jsonschema.validate(doc, committed_schema())
    again = Report.model_validate_json(text)
    assert again == mixed_report or again.model_dump_json() == text
    assert doc["schema_version"] == SCHEMA_VERSION and doc["kind"] == "kernelproof.report"


def test_summary_rules(mixed_report: Report) -> None:
    s = mixed_report.summary
    assert s.cases_total == 4 and s.cases_passed == 2 and s.cases_failed == 2
    assert s.verdict is Verdict.NON_FINITE and s.reward == -1.0
    assert s.first_failure is not None and s.first_failure.code is Verdict.NON_FINITE
    passing = [c for c in mixed_report.cases if c.verdict is Verdict.PASS]
    assert all(c.timing is not None for c in passing)
    if mixed_report.config.device == "interpreter":
        assert all(c.timing.kind == "interpreter_wall_clock" and c.reward is None for c in passing)  # type: ignore[union-attr]
    failing = [c for c in mixed_report.cases if c.verdict is not Verdict.PASS]
    assert all(c.timing is None and c.reward is not None and c.reward.value == -1.0 for c in failing)


def test_infinite_metrics_survive_json() -> None:
    """NaN output gives infinite error metrics; they must serialize as strict JSON and validate back."""
    import torch

    from kernelproof_core.metrics import error_metrics
    from kernelproof_core.report.models import ErrorMetrics
    from kernelproof_core.tolerances import policy_for

    m = error_metrics(torch.tensor([1.0, float("nan")]), torch.ones(2, dtype=torch.float64),
                      policy_for("rms_norm", torch.float32))
    text = m.model_dump_json()
    json.loads(text)  # strict JSON
    again = ErrorMetrics.model_validate_json(text)
    assert math.isinf(again.max_abs) and math.isinf(again.rel_l2) and again.mismatch_count == 1


def test_markdown_is_derived_from_the_report(mixed_report: Report) -> None:
    md = render_markdown(mixed_report)
    assert mixed_report.run_id in md
    assert "`non_finite`" in md and "`pass`" in md
    assert "## Failures" in md and "bad.py" in md
    assert f"{mixed_report.summary.cases_passed}/{mixed_report.summary.cases_total} cases passed" in md
    if mixed_report.config.device == "interpreter":
        assert "never rewarded" in md


def test_markdown_has_the_achieved_bandwidth_and_sampling_tables(mixed_report: Report) -> None:
    md = render_markdown(mixed_report)
    assert "## Achieved bandwidth" in md and "## Sampling and clocks" in md
    header = ("| task | dtype | case | shape | MB moved | cand µs (events) | cand µs (kernel) | cand µs (launch-incl.) "
              "| launch overhead µs | GB/s (events) | GB/s (kernel) | % SOL (events) | % SOL (kernel) "
              "| speedup vs baseline |")
    assert header in md
    assert "include CUPTI's per-launch callbacks: an upper bound" in md  # what the launch-inclusive column is
    timed = [c for c in mixed_report.cases if c.timing is not None]
    bandwidth = md.split("## Achieved bandwidth")[1].split("## Sampling and clocks")[0]
    assert all(f"| {c.task} | {c.dtype} | {c.case_id} |" in bandwidth for c in timed)
    sampling = md.split("## Sampling and clocks")[1]
    assert all(f"| {c.case_id} | {t.sample_launch or '–'} | `{t.stopped_by}` |" in sampling
               for c in timed if (t := c.timing) is not None)


def test_bandwidth_row_of_a_gpu_case() -> None:
    """A CUDA case's row: bytes, latencies, launch overhead, GB/s and % of copy bandwidth both ways, speedup."""
    from kernelproof_core.measurement.speed_of_light import speed_of_light
    from kernelproof_core.measurement.stats import summarize
    from kernelproof_core.report.models import Timing

    campaign = Campaign(device="interpreter", dtypes=["bfloat16"], case_set=CaseSet.INTERPRETER, case_ids=["n1"],
                        samples=2, warmups=0, invocations_per_sample=1)
    report = run_verification([CandidateJob(task="rms_norm", source=source("honest"))], campaign, InProcessExecutor())
    case = report.cases[0]
    case.timing = Timing(
        kind="cuda_events", warmups=10, samples=40, invocations_per_sample=100, input_sets=2, l2_flush_bytes=1,
        candidate=summarize([500.0] * 40), baseline=summarize([1000.0] * 40), candidate_device_us=400.0,
        baseline_device_us=900.0, reward_input="x", speedup=2.0, min_bytes=10**9, stopped_by="noise_target",
        target_rse=0.005, candidate_rse=0.004, baseline_rse=0.001, throttled_samples=3, sm_clock_mhz_min=1700,
        sm_clock_mhz_max=1980, sm_clock_mhz_start=1980,
        mem_clock_mhz_start=3201, temperature_c_start=45, candidate_launch_inclusive=summarize([520.0] * 5),
        launch_exposed_samples=1, deferred_samples=2, candidate_host_us_per_call=27.25, sample_launch="cuda_graph",
        **speed_of_light(10**9, 500.0, 400.0, 4000.0, 520.0),
    )
    md = render_markdown(report)
    assert (f"| rms_norm | bfloat16 | n1 | {'x'.join(map(str, case.dims.values()))} | 1000.0 | 500.00 | 400.00 | "
            "520.00 | 120.00 | 2000 | 2500 | 50.0 | 62.5 | 2.000 |") in md
    assert ("Speed of light = device copy bandwidth, the better of the verifying process's quick probe and the "
            "environment's measurement: 4000 GB/s") in md

    # A better copy measurement in the environment becomes the reference, and both fractions follow it.
    from kernelproof_core.report.models import GpuInfo
    from kernelproof_core.verify import build_report

    gpu = GpuInfo(name="H200", capability="9.0", sm_count=132, memory_bytes=1, copy_bandwidth_gbps=5000.0)
    rebuilt = build_report(command="verify", campaign=campaign, candidates=report.candidates, cases=[case],
                           environment=report.environment.model_copy(update={"gpu": gpu}),
                           isolation=report.isolation, created=report.created_at, duration_s=1.0)
    timing = rebuilt.cases[0].timing
    assert timing is not None and timing.copy_bandwidth_gbps == 5000.0
    assert timing.speed_of_light_fraction == pytest.approx(0.4)
    assert timing.speed_of_light_fraction_kernel == pytest.approx(0.5)
    assert case.timing.copy_bandwidth_gbps == 4000.0  # the input report is not mutated
    slower = report.environment.model_copy(update={"gpu": gpu.model_copy(update={"copy_bandwidth_gbps": 3000.0})})
    kept = build_report(command="verify", campaign=campaign, candidates=report.candidates, cases=[case],
                        environment=slower, isolation=report.isolation, created=report.created_at, duration_s=1.0)
    assert kept.cases[0].timing.copy_bandwidth_gbps == 4000.0  # type: ignore[union-attr]
    assert ("| n1 | cuda_graph | `noise_target` | 40/40 | 0.40 | 0.10 | 3 | 1 | 2 | 27.2 | 1980 | 1700–1980 | 3201 "
            "| 45 |") in md
