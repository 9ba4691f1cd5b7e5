"""A campaign: what to verify a candidate on and how hard to measure it. Serializable, so it crosses into the
sandboxed child unchanged."""

from __future__ import annotations

import secrets
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from kernelproof_core.measurement.stopping import StoppingRule
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
    stopping: StoppingRule | None = Field(
        None, description="CUDA: sample until this noise target instead of a fixed count (None: `samples` exactly)"
    )
    compile_timeout_s: float = Field(300.0, gt=0, description="load + first (JIT) call of each case")
    execution_timeout_s: float = Field(900.0, gt=0, description="everything after compilation, per candidate")
    # --- Cheat checks (kernelproof_core/integrity, docs/METHODOLOGY.md "Cheat checks").
    hidden_cases: bool | None = Field(
        None, description="add per-run hidden cases; None: on when case_ids is None (a run of every case)"
    )
    hidden_seed: int | None = Field(
        None,
        ge=0,
        description="secret the hidden cases are drawn from; drawn from os.urandom where the campaign is built (the "
        "trusted parent), never derived from `seed`. Set it only to replay a run's hidden cases.",
    )
    static_policy: bool = Field(
        False, description="reject sources that break the static policy (integrity/policy.py) before they run"
    )

    def model_post_init(self, context: Any, /) -> None:
        # The trusted side draws the secret when it builds the campaign; the sandboxed child receives it inside the
        # campaign, so parent and child plan the same cases, and it never passes through environment or files.
        if self.hidden_seed is None and self.uses_hidden_cases:
            self.hidden_seed = secrets.randbits(63)

    def public_dump(self) -> dict[str, Any]:
        """The campaign as stored and shown to clients: without the hidden-case secret. A campaign rebuilt from it
        draws a fresh secret on the trusted side that runs it, so the secret never reaches the database, the API or
        the verdict-reuse key."""
        # Without a stopping rule the dump is what it was before the field existed: stored verdict keys stay valid.
        hidden = {"hidden_seed"} if self.stopping is not None else {"hidden_seed", "stopping"}
        return self.model_dump(mode="json", exclude=hidden)

    @property
    def uses_hidden_cases(self) -> bool:
        return self.hidden_cases if self.hidden_cases is not None else self.case_ids is None


class CandidateJob(BaseModel):
    """One candidate source for one task. In JSON the source bytes travel base64-encoded (they may not be UTF-8:
    that is for gate 1 to judge, not the transport)."""

    model_config = ConfigDict(extra="forbid", ser_json_bytes="base64", val_json_bytes="base64")

    task: str
    source: bytes
    origin: Literal["builtin", "file", "submission"] = "file"
    filename: str = "<candidate>"
