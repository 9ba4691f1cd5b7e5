"""The report: one JSON document per run, the source of truth for every verdict, timing and reward.

Markdown, API responses and database rows are all derived from these models. Bump SCHEMA_VERSION on any change a
consumer could notice, and regenerate the committed JSON Schema (`python -m kernelproof_core.report.schema --write`).
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from kernelproof_core.measurement.stopping import StoppedBy, StoppingRule
from kernelproof_core.verdicts import Verdict

SCHEMA_VERSION = "1.5"

TimingKind = Literal["cuda_events", "interpreter_wall_clock"]


class _Model(BaseModel):
    # Infinite error metrics (a NaN-ridden output) serialize as the strings "Infinity"/"NaN", which stay valid JSON
    # (Postgres JSONB rejects bare Infinity) and validate back into floats.
    model_config = ConfigDict(extra="forbid", ser_json_inf_nan="strings")


class Distribution(_Model):
    """Summary of a timing distribution, per invocation, in microseconds, plus the raw samples."""

    unit: Literal["us"] = "us"
    count: int
    median: float
    p95: float
    min: float
    max: float
    mean: float
    cv: float = Field(description="coefficient of variation (stdev / mean) of the samples")
    samples: list[float]


class ErrorMetrics(_Model):
    """Candidate output against the oracle (computed in float64)."""

    numel: int
    max_abs: float
    max_rel: float
    mean_abs: float
    rmse: float
    rel_l2: float
    cosine: float
    mismatch_count: int
    first_mismatch_index: list[int] | None
    beyond_1ulp_fraction: float | None = Field(
        None, description="bf16/fp16 outputs: share of elements more than one ulp from the oracle (precision check)"
    )


class Timing(_Model):
    """Device time per call (events, launches hidden), launch-inclusive latency and kernel-only device time for
    candidate and baseline, measured interleaved in one process on the same inputs."""

    kind: TimingKind
    warmups: int
    samples: int = Field(description="samples taken per implementation, throttled pairs included (see counts)")
    invocations_per_sample: int = Field(description="the candidate's calls per sample (at most; see audited_samples)")
    baseline_invocations_per_sample: int | None = Field(
        None, description="the baseline's calls per sample: each implementation fits its own into max_sample_ms"
    )
    input_sets: int = Field(description="distinct input sets rotated through so samples do not hit a warm L2")
    l2_flush_bytes: int
    candidate: Distribution = Field(
        description="per-call device time: CUDA events around calls queued while the GPU was held (launches hidden)"
    )
    baseline: Distribution
    candidate_launch_inclusive: Distribution | None = Field(
        None, description="per-call latency of ungated samples: the host's launch cost included (reported only)"
    )
    baseline_launch_inclusive: Distribution | None = None
    candidate_host_us_per_call: float | None = Field(None, description="median host time to queue one call")
    baseline_host_us_per_call: float | None = None
    launch_exposed_samples: int | None = Field(
        None, description="candidate samples the host may not have fully queued before the GPU ran them (host time "
        "included: only slower)"
    )
    launch_gate: str | None = Field(
        None, description="how launches were hidden: host_release (GPU held until the sample was queued) or sleep"
    )
    deferred_samples: int | None = Field(
        None, description="candidate samples with a long tail after the end event (host wake-up or deferred work)"
    )
    sample_launch: str | None = Field(
        None, description="how a sample's calls reached the GPU: cuda_graph (captured once, replayed per sample) or "
        "stream (launched one by one; the note says why no graph)"
    )
    candidate_device_us: float | None = Field(None, description="median kernel-only time per call (profiler)")
    baseline_device_us: float | None = None
    device_time_source: str | None = None
    reward_input: str = Field(description="which statistic fed the reward")
    speedup: float = Field(description="baseline median / candidate median")
    achieved_bandwidth_gbps: float | None = Field(None, description="min_bytes over the candidate device-time median")
    min_bytes: int
    note: str | None = None
    audited_samples: int = Field(0, description="timed samples whose last output was verified on fresh inputs")
    sync_gap_us: float | None = Field(
        None, description="calibrated device-sync gap, removed from each launch-inclusive sample"
    )
    time_floor_us: float | None = Field(None, description="physical floor per call: min_bytes at the device's limit")
    # Sampling: fixed count or noise target (measurement/stopping.py).
    stopped_by: StoppedBy = Field(
        "fixed_count", description="what ended sampling: the fixed count, the noise target, the time cap or max samples"
    )
    target_rse: float | None = Field(None, description="the noise target (relative standard error of the median)")
    candidate_rse: float | None = Field(None, description="achieved relative standard error of the candidate median")
    baseline_rse: float | None = Field(None, description="achieved relative standard error of the baseline median")
    # Clocks (NVML, measurement/clocks.py); None where NVML is unavailable.
    throttled_samples: int | None = Field(
        None, description="sample pairs discarded because the SM clock fell or a thermal/power slowdown was active"
    )
    sm_clock_mhz_min: int | None = Field(None, description="lowest SM clock read around any sample")
    sm_clock_mhz_max: int | None = Field(None, description="highest SM clock read around any sample")
    sm_clock_mhz_start: int | None = Field(None, description="SM clock after the warm-ups: the throttling reference")
    mem_clock_mhz_start: int | None = None
    temperature_c_start: int | None = None
    # Speed of light (measurement/speed_of_light.py), CUDA only.
    kernel_bandwidth_gbps: float | None = Field(None, description="min_bytes over kernel-only device time")
    copy_bandwidth_gbps: float | None = Field(
        None, description="speed-of-light reference: the better of the verifying process's copy probe and "
        "environment.gpu.copy_bandwidth_gbps (read+write GB/s)")
    speed_of_light_fraction: float | None = Field(
        None, description="achieved_bandwidth_gbps (device-time median) / copy_bandwidth_gbps"
    )
    speed_of_light_fraction_kernel: float | None = Field(
        None, description="kernel_bandwidth_gbps (kernel-only device time) / copy_bandwidth_gbps"
    )
    launch_overhead_us: float | None = Field(
        None, description="candidate launch-inclusive median minus its kernel-only device time"
    )


# Outcomes of the dependent-launch probe (integrity/dependent_launch.py).
DependentLaunchProbe = Literal["passed", "stream_only", "off", "unsupported"]


class Integrity(_Model):
    """Evidence of the cheat checks for one case (kernelproof_core/integrity)."""

    own_launches: int = Field(description="launches of the candidate's own Triton kernels in the first call")
    kernels: list[str] = Field(default_factory=list, description="the candidate's kernels seen launching")
    foreign_gpu_share: float | None = Field(
        None, description="GPU: share of a call's GPU time in kernels the candidate did not write (CUPTI)"
    )
    policy: str | None = Field(None, description="static policy version the source was checked against")
    dependent_launch: DependentLaunchProbe | None = Field(
        None, description="the dependent-launch probe (its inputs written by the kernel just before it): passed "
        "from the stream and from a CUDA graph, stream_only (not capturable), off (setting), unsupported (no PDL: "
        "interpreter, before sm_90); null where the case did not reach it"
    )
    dependent_launch_timed: DependentLaunchProbe | None = Field(
        None, description="the same probe after the timed samples, in place on a ring input set the timed calls "
        "used, its graph calling the candidate on other ring sets first (a candidate that waits only on inputs it has "
        "not seen, or only on a capture's first call, passes the first and fails this one); null "
        "where the case was not timed (interpreter, a failed gate, measure off)"
    )


class Reward(_Model):
    spec: str
    value: float
    speed_score: float | None = None
    instability: float | None = None
    note: str | None = None


class Failure(_Model):
    code: Verdict
    message: str
    detail: str | None = None


class CaseResult(_Model):
    task: str
    dtype: str
    case_id: str
    case_kind: str
    description: str
    dims: dict[str, int]
    input_shapes: list[list[int]]
    input_strides: list[list[int]]
    output_shape: list[int]
    verdict: Verdict
    failure: Failure | None = None
    tolerance: dict[str, float]
    error: ErrorMetrics | None = None
    timing: Timing | None = None
    reward: Reward | None = None
    integrity: Integrity | None = None


class CandidateInfo(_Model):
    task: str
    origin: Literal["builtin", "file", "submission"]
    path: str | None = None
    source_sha256: str
    size_bytes: int


class Isolation(_Model):
    """How the candidate was isolated; every report says which layers were active."""

    sandboxed: bool
    layers: list[str] = Field(default_factory=list)
    missing_layers: list[str] = Field(default_factory=list)
    note: str | None = None


class GpuInfo(_Model):
    name: str
    capability: str
    sm_count: int
    memory_bytes: int
    l2_bytes: int | None = None
    driver: str | None = None
    sm_clock_mhz: int | None = None
    mem_clock_mhz: int | None = None
    temperature_c: int | None = None
    max_sm_clock_mhz: int | None = None
    max_mem_clock_mhz: int | None = None
    power_limit_w: float | None = Field(None, description="enforced power limit")
    copy_bandwidth_gbps: float | None = Field(
        None, description="measured device-to-device copy, read+write bytes: best of memcpy and a Triton copy, 1 GiB")


class Environment(_Model):
    device: Literal["cuda", "interpreter"]
    hostname: str
    platform: str
    python: str
    torch: str
    triton: str
    cuda: str | None = None
    gpu: GpuInfo | None = None
    harness_version: str


class RunConfig(_Model):
    command: str
    tasks: list[str]
    dtypes: list[str]
    device: Literal["cuda", "interpreter"]
    case_set: str
    seed: int
    warmups: int
    samples: int
    invocations_per_sample: int
    measure: bool
    stopping: StoppingRule | None = Field(None, description="noise target replacing the fixed sample count (CUDA)")


class Summary(_Model):
    verdict: Verdict
    cases_total: int
    cases_passed: int
    cases_failed: int
    first_failure: Failure | None = None
    reward: float | None
    reward_spec: str
    aggregate_rule: str
    geomean_speedup: float | None = None
    reward_note: str | None = None


class Report(_Model):
    schema_version: str = SCHEMA_VERSION
    kind: Literal["kernelproof.report"] = "kernelproof.report"
    run_id: str
    created_at: datetime
    duration_s: float
    config: RunConfig
    environment: Environment
    isolation: Isolation
    candidates: list[CandidateInfo]
    cases: list[CaseResult]
    summary: Summary
