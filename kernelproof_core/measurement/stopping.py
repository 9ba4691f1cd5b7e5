"""When to stop timing: a fixed sample count (the default), or a noise target (adaptive stopping).

A campaign with a `StoppingRule` keeps taking interleaved candidate/baseline samples, in batches, until both medians
are known to the requested precision, with a floor on samples and measured time and a ceiling on samples and wall
time. `stop_reason` is the whole decision and is pure, so it is tested on synthetic sample sequences.

Precision is the relative standard error (RSE) of the median, estimated by `median_rse`:
    RSE = sqrt(pi / 2) * sigma / sqrt(n) / median,  sigma = 1.4826 * MAD.
sqrt(pi/2) * sigma / sqrt(n) (1.2533...) is the asymptotic standard error of a sample median under normal noise.
sigma comes from the median absolute deviation, not the standard deviation, because the median's variance depends
on the density near the median, not on the tails: GPU timings are tight with rare large outliers (preemption, a
clock change), and one outlier would inflate the standard deviation and keep an adaptive run going to its time cap
though the median had long settled. A bootstrap would give a similar number, but it is random unless seeded and
costs thousands of re-sorts per check; this estimate is deterministic and O(n log n), cheap enough to run after every
batch.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

StoppedBy = Literal["fixed_count", "noise_target", "time_cap", "max_samples"]

SQRT_HALF_PI = math.sqrt(math.pi / 2)  # 1.2533: SE(median) = SQRT_HALF_PI * sigma / sqrt(n) for normal noise
MAD_TO_SIGMA = 1.4826  # sigma = 1.4826 * MAD for normal noise


class StoppingRule(BaseModel):
    """A noise target for CUDA timing, replacing the campaign's fixed sample count (see module docstring)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    target_rse: float = Field(gt=0, lt=1, description="stop once both medians' relative standard error is below this")
    min_samples: int = Field(20, ge=3, description="samples per implementation before the target may stop a run")
    max_samples: int = Field(5000, ge=3, description="samples taken per implementation, at most (discarded count)")
    min_measured_s: float = Field(
        0.0, ge=0, description="time inside timed regions (candidate + baseline) before the target may stop a run"
    )
    max_measure_s: float = Field(30.0, gt=0, description="wall-clock cap on the sampling loop of one case")
    batch_samples: int = Field(10, ge=1, description="interleaved sample pairs between two checks")

    @model_validator(mode="after")
    def _ordered(self) -> StoppingRule:
        if self.max_samples < self.min_samples:
            raise ValueError("max_samples must be at least min_samples")
        return self


def median_rse(samples: Sequence[float]) -> float:
    """Relative standard error of the median (module docstring); inf for fewer than 3 samples or a median <= 0."""
    n = len(samples)
    if n < 3:
        return math.inf
    median = statistics.median(samples)
    if median <= 0:
        return math.inf
    mad = statistics.median(abs(x - median) for x in samples)
    return SQRT_HALF_PI * MAD_TO_SIGMA * mad / math.sqrt(n) / median


def stop_reason(
    rule: StoppingRule,
    candidate_us: Sequence[float],
    baseline_us: Sequence[float],
    *,
    taken: int,
    measured_s: float,
    elapsed_s: float,
) -> StoppedBy | None:
    """Why to stop now, or None to take another batch.

    candidate_us / baseline_us are the kept samples (throttled pairs already removed); `taken` counts the samples
    taken per implementation, kept or not; `measured_s` is the time inside the kept samples' timed regions, both
    implementations together; `elapsed_s` the wall time since the first sample. The noise target wins over a cap
    reached at the same check, because it is the more informative answer.
    """
    kept = min(len(candidate_us), len(baseline_us))
    if (
        kept >= rule.min_samples
        and measured_s >= rule.min_measured_s
        and median_rse(candidate_us) <= rule.target_rse
        and median_rse(baseline_us) <= rule.target_rse
    ):
        return "noise_target"
    if taken >= rule.max_samples:
        return "max_samples"
    if elapsed_s >= rule.max_measure_s:
        return "time_cap"
    return None
