"""Reward specifications. `kernelproof.reward.v1` is frozen: any change to the formula needs a new identifier.

v1, per case:
    if correctness failed: reward = -1
    else: speed_score = clip(log2(reference_median / candidate_median), -2, 2)
          instability = min(0.5, 2 * max(0, timing_cv - 0.05))
          reward = speed_score - instability
reference_median and candidate_median are the launch-inclusive per-invocation medians (CUDA events) measured
interleaved in one process; timing_cv is the candidate's coefficient of variation over its samples.

Aggregate over a run: -1 if any case failed; otherwise the arithmetic mean of the per-case rewards (a mean of log2
speedups, i.e. the log2 of the geometric-mean speedup when nothing is clipped or unstable).
"""

from __future__ import annotations

import math

from kernelproof_core.report.models import Reward

REWARD_V1 = "kernelproof.reward.v1"
FAILURE_REWARD = -1.0
AGGREGATE_RULE_V1 = "-1 if any case failed; else mean of per-case rewards"
SPEED_CLIP = 2.0
CV_FREE = 0.05
CV_SLOPE = 2.0
INSTABILITY_CAP = 0.5


def speed_score(reference_median: float, candidate_median: float) -> float:
    if reference_median <= 0 or candidate_median <= 0:
        raise ValueError("medians must be positive")
    return max(-SPEED_CLIP, min(SPEED_CLIP, math.log2(reference_median / candidate_median)))


def instability(timing_cv: float) -> float:
    return min(INSTABILITY_CAP, CV_SLOPE * max(0.0, timing_cv - CV_FREE))


def case_reward_v1(reference_median: float, candidate_median: float, timing_cv: float) -> Reward:
    """Reward of a case that passed every gate."""
    s = speed_score(reference_median, candidate_median)
    u = instability(timing_cv)
    return Reward(spec=REWARD_V1, value=s - u, speed_score=s, instability=u)


def failed_case_reward_v1() -> Reward:
    return Reward(spec=REWARD_V1, value=FAILURE_REWARD, note="correctness failed")


def aggregate_v1(case_rewards: list[float | None], any_failed: bool) -> float | None:
    """Run-level reward; None when no case produced a speed reward (e.g. interpreter runs that all passed)."""
    if any_failed:
        return FAILURE_REWARD
    values = [r for r in case_rewards if r is not None]
    if not values or len(values) != len(case_rewards):
        return None
    return sum(values) / len(values)
