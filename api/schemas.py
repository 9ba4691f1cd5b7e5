"""Request and response bodies of the /v1 API, with the examples the OpenAPI document shows."""

from __future__ import annotations

import json
import math
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, WithJsonSchema, model_validator

from kernelproof_core.measurement.stopping import StoppingRule
from kernelproof_core.presets import DEFAULT_PRESET

EXAMPLE_SOURCE = (
    "import torch\nimport triton\nimport triton.language as tl\n\n@triton.jit\ndef _k(...): ...\n\n"
    "def candidate(x, weight, eps):\n    ...\n"
)
PresetName = Annotated[str, StringConstraints(pattern=r"^[a-z][a-z0-9_-]{0,31}$")]
Tag = Annotated[str, StringConstraints(min_length=1, max_length=64)]
MAX_METADATA_DEPTH = 8


def _check_json_value(value: Any, depth: int = 0) -> None:
    """Reject what no database can store: non-finite numbers and values nested absurdly deep."""
    if depth > MAX_METADATA_DEPTH:
        raise ValueError(f"metadata is nested deeper than {MAX_METADATA_DEPTH} levels")
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError("metadata numbers must be finite")
    if isinstance(value, dict):
        for v in value.values():
            _check_json_value(v, depth + 1)
    elif isinstance(value, list):
        for v in value:
            _check_json_value(v, depth + 1)


class CampaignSpec(BaseModel):
    """A preset with explicit overrides, each within the operator's limits."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {"preset": "quick", "samples": 20},
                {"preset": "standard", "case_ids": ["n1", "tail127"]},
                {"preset": "standard", "stopping": {"target_rse": 0.005, "max_measure_s": 10}},
            ]
        },
    )

    preset: PresetName = Field(default=DEFAULT_PRESET, description="quick | standard | full")
    warmups: int | None = Field(default=None, ge=0)
    samples: int | None = Field(default=None, ge=1)
    invocations_per_sample: int | None = Field(default=None, ge=1)
    case_ids: list[Annotated[str, StringConstraints(min_length=1, max_length=64)]] | None = Field(
        default=None, min_length=1, max_length=64, description="only these cases (see GET /v1/tasks/{name})"
    )
    seed: int | None = Field(default=None, ge=0, le=2**62, description="seed of the randomized cases")
    measure: bool | None = Field(default=None, description="false: correctness gates only, no timings, no speed reward")
    stopping: StoppingRule | None = Field(
        default=None,
        description="CUDA: time each case until both medians' relative standard error is below target_rse (within "
        "min/max samples and max_measure_s, capped by the operator) instead of a fixed sample count; ignored on "
        "the interpreter",
    )


class SubmissionMetadata(BaseModel):
    """Free-form metadata; generator, model, run_id and tags are indexed for filtering and SQL views."""

    model_config = ConfigDict(extra="allow")

    generator: str | None = Field(default=None, max_length=200, examples=["grpo-policy"])
    model: str | None = Field(default=None, max_length=200, examples=["qwen-32b-step-1200"])
    run_id: str | None = Field(default=None, max_length=200, examples=["run-2024-06-01-a"])
    tags: list[Tag] = Field(default_factory=list, max_length=32, examples=[["ablation", "bf16"]])


class SubmissionRequest(BaseModel):
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "task": "rms_norm",
                    "source": EXAMPLE_SOURCE,
                    "dtypes": ["bfloat16"],
                    "campaign": "quick",
                    "metadata": {
                        "generator": "grpo-policy",
                        "model": "qwen-32b-step-1200",
                        "tags": ["ablation"],
                    },
                }
            ]
        },
    )

    task: str = Field(min_length=1, max_length=64, examples=["rms_norm"])
    source: str = Field(min_length=1, description="the candidate module's Python source (UTF-8 text)")
    dtypes: list[Annotated[str, StringConstraints(min_length=1, max_length=16)]] | None = Field(
        default=None,
        min_length=1,
        max_length=8,
        description="default: the preset picks from the task's dtypes",
    )
    campaign: PresetName | CampaignSpec = Field(default=DEFAULT_PRESET, description="preset name or CampaignSpec")
    gpu_class: str | None = Field(
        default=None,
        pattern=r"^[a-z0-9][a-z0-9_.-]{0,31}$",
        examples=["h200"],
        description="route to workers of this GPU class (default: any)",
    )
    metadata: SubmissionMetadata = Field(default_factory=lambda: SubmissionMetadata())

    @model_validator(mode="after")
    def _storable(self) -> SubmissionRequest:
        # Text columns and JSONB reject NUL and lone surrogates; refuse them here rather than fail at insert.
        try:
            text = json.dumps(self.model_dump(mode="json"), ensure_ascii=False)
            text.encode("utf-8")
        except (UnicodeEncodeError, ValueError) as exc:
            raise ValueError("strings must be valid UTF-8 text") from exc
        if "\\u0000" in text:
            raise ValueError("strings must not contain NUL characters")
        _check_json_value(self.metadata.model_dump(mode="python"))
        return self


class BatchRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    items: Annotated[
        list[dict[str, Any]],
        WithJsonSchema({"type": "array", "minItems": 1, "items": {"$ref": "#/components/schemas/SubmissionRequest"}}),
    ] = Field(min_length=1, description="each item is validated on its own; failures are reported per item")


SubmissionState = Literal["queued", "running", "finished", "error"]


SUBMISSION_EXAMPLES: dict[str, dict[str, Any]] = {
    "quick": {
        "summary": "A preset campaign with metadata",
        "value": {
            "task": "rms_norm",
            "source": EXAMPLE_SOURCE,
            "campaign": "quick",
            "metadata": {"generator": "grpo-policy", "model": "qwen-32b-step-1200", "tags": ["ablation"]},
        },
    },
    "explicit": {
        "summary": "Two dtypes, explicit sampling, routed to H200 workers",
        "value": {
            "task": "softmax",
            "source": EXAMPLE_SOURCE,
            "dtypes": ["bfloat16", "float16"],
            "campaign": {"preset": "standard", "samples": 50, "warmups": 5},
            "gpu_class": "h200",
        },
    },
    "correctness-only": {
        "summary": "Two cases, no timing",
        "value": {
            "task": "rms_norm",
            "source": EXAMPLE_SOURCE,
            "campaign": {"preset": "quick", "case_ids": ["n1", "tail127"], "measure": False},
        },
    },
}
BATCH_EXAMPLES: dict[str, dict[str, Any]] = {
    "two": {
        "summary": "Two candidates in one request",
        "value": {"items": [SUBMISSION_EXAMPLES["quick"]["value"], SUBMISSION_EXAMPLES["explicit"]["value"]]},
    }
}


class SubmissionView(BaseModel):
    id: str = Field(examples=["3f2c9a0e5b7d4e1f8a6b2c4d9e0f1a2b"])
    url: str = Field(examples=["/v1/submissions/3f2c9a0e5b7d4e1f8a6b2c4d9e0f1a2b"])
    state: SubmissionState
    task: str
    dtypes: list[str]
    campaign_preset: str | None
    campaign: dict[str, Any] = Field(description="the resolved campaign the worker runs")
    gpu_class: str | None
    metadata: dict[str, Any]
    source_sha256: str
    verdict: str | None = Field(examples=["pass"])
    reward: float | None = Field(
        description="run reward (summary.reward_spec: kernelproof.reward.v2 since harness 0.4); null: no speed reward"
    )
    summary: dict[str, Any] | None = Field(description="the report's summary section")
    reused: bool = Field(description="answered from the stored verdict of an identical earlier submission")
    reused_from: str | None
    attempts: int
    error: str | None
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    report_url: str | None
    report_markdown_url: str | None


class SubmissionList(BaseModel):
    items: list[SubmissionView]
    next_cursor: str | None = Field(description="pass as ?cursor= for the next page; null at the end")


class BatchItemResult(BaseModel):
    index: int
    status: int = Field(description="202 accepted (or replayed); otherwise the problem's status")
    submission: SubmissionView | None = None
    problem: dict[str, Any] | None = None


class BatchResult(BaseModel):
    results: list[BatchItemResult]


class CaseView(BaseModel):
    case_id: str
    kind: str
    dims: dict[str, int]
    description: str
    distribution: str
    row_stride_pad: int


class TaskView(BaseModel):
    name: str = Field(examples=["rms_norm"])
    signature: str
    math: str
    output: str
    dtypes: list[str]
    notes: str
    reward_spec: str = Field(examples=["kernelproof.reward.v2"])
    tolerances: dict[str, dict[str, float]] = Field(description="per dtype: atol, rtol, max_rel_l2")
    public_cases: dict[str, list[CaseView]] = Field(description="per case set (full, interpreter), seed 0")
    presets: dict[str, dict[str, Any]]


class LeaderboardEntry(BaseModel):
    rank: int
    submission_id: str
    url: str
    task: str
    dtype: str
    gpu_class: str | None
    reward: float | None = Field(description="mean case reward for this dtype; null without a speed reward")
    reward_spec: str | None = Field(description="the reward spec of `reward`; null without a speed reward")
    cases_passed: int
    cases_total: int
    generator: str | None
    model: str | None
    source_sha256: str
    finished_at: datetime | None


class Leaderboard(BaseModel):
    entries: list[LeaderboardEntry]


class Health(BaseModel):
    status: Literal["ok"] = "ok"
    checks: dict[str, str] = Field(default_factory=dict)
