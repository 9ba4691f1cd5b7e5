"""The one typed settings object. Every tunable lives here, with its unit in its name.

Values come from environment variables prefixed KERNELPROOF_ (e.g. KERNELPROOF_CANDIDATE_MAX_SOURCE_BYTES) or a .env
file. Services read `get_settings()`; tests construct `Settings(...)` directly.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Literal

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict


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
    interpreter_samples: int = Field(3, description="wall-clock samples under the interpreter (never rewarded)")
    profiler_invocations: int = Field(20, description="calls traced by torch.profiler for kernel-only time")

    # Where things go.
    data_dir: Path = Field(Path.home() / ".kernelproof", description="embedded database, scratch, caches")

    # --- Verification service (API, queue, GPU workers, embedded mode). Owned by the service; docs/OPERATIONS.md.
    # Storage and queue.
    database_url: str = Field("", description="SQLAlchemy URL; empty: the embedded SQLite file under data_dir")
    broker_url: str = Field("redis://127.0.0.1:6379/0", description="Celery broker (Redis)")
    broker_key_prefix: str = Field("", description="prefix of every Redis key the service writes (isolation)")
    queue_backend: Literal["celery", "embedded"] = Field(
        "celery", description="celery: Redis + `kernelproof worker`; embedded: an in-process worker thread"
    )
    queue_prefix: str = Field("kernelproof", description="Celery queues are <prefix>.<gpu_class> and <prefix>.any")
    gpu_classes: list[str] = Field(default_factory=list, description="accepted gpu_class values (empty: any)")
    worker_gpu_class: str | None = Field(None, description="the GPU class this worker serves (queue routing)")
    service_device: Literal["auto", "cuda", "interpreter"] = "auto"
    sandbox_enabled: bool = Field(True, description="service workers verify inside the sandboxed runner")
    reuse_verdicts: bool = Field(True, description="answer identical resubmissions from the stored verdict")
    # API limits.
    api_auth_required: bool = True
    api_rate_limit_per_minute: int = Field(600, ge=1, description="per API key unless the key overrides it")
    api_max_request_bytes: int = Field(4 * 1024 * 1024, description="cap on any request body")
    api_max_metadata_bytes: int = Field(16 * 1024, description="cap on a submission's metadata (as JSON)")
    api_max_batch_items: int = Field(64, ge=1)
    api_max_warmups: int = 100
    api_max_samples: int = 1000
    api_max_invocations_per_sample: int = 1000
    api_long_poll_max_s: float = Field(60.0, description="longest ?wait= a GET may hold a connection")
    api_long_poll_interval_s: float = Field(0.5, description="database poll period while long-polling")
    api_list_max_limit: int = 500
    # Jobs, retries and the sweeper.
    job_deadline_s: float = Field(3600.0, description="a running job past this is presumed dead and re-queued")
    job_max_attempts: int = Field(3, ge=1, description="attempts before a job ends as infra_error")
    sweeper_interval_s: float = 30.0
    sweeper_lost_message_after_s: float = Field(300.0, description="queued this long with an empty queue: resend")
    celery_visibility_timeout_s: float = Field(7200.0, description="raised to job_deadline_s + 10 min if lower")
    # Client (`kernelproof submit`, kernelproof_core.client).
    client_url: str = "http://127.0.0.1:8000"
    client_api_key: str | None = None


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    return Settings()
