"""A campaign: what to verify a candidate on and how hard to measure it. Serializable, so it crosses into the
sandboxed child unchanged."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from kernelproof_core.tasks.base import CaseSet

Device = Literal["cuda", "interpreter"]


class Campaign(BaseModel):
    """How to verify: device, dtypes, cases and the measurement plan. Timeouts are enforced by the supervisor."""

    model_config = ConfigDict(extra="forbid")

    device: Device
    dtypes: list[str] = Field(min_length=1)
    case_set: CaseSet = CaseSet.FULL
    case_ids: list[str] | None = Field(None, description="restrict to these case ids (None: all in the case set)")
    seed: int = 0
    warmups: int = Field(10, ge=0)
    samples: int = Field(100, ge=1)
    invocations_per_sample: int = Field(100, ge=1)
    measure: bool = True
    compile_timeout_s: float = Field(300.0, gt=0, description="load + first (JIT) call of each case")
    execution_timeout_s: float = Field(900.0, gt=0, description="everything after compilation, per candidate")


class CandidateJob(BaseModel):
    """One candidate source for one task. In JSON the source bytes travel base64-encoded (they may not be UTF-8:
    that is for gate 1 to judge, not the transport)."""

    model_config = ConfigDict(extra="forbid", ser_json_bytes="base64", val_json_bytes="base64")

    task: str
    source: bytes
    origin: Literal["builtin", "file", "submission"] = "file"
    filename: str = "<candidate>"
