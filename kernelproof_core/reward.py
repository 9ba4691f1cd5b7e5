"""Reward specifications. Each identifier is frozen: any change to the formula or its inputs needs a new one.

v2 (current) is v1's formula over different inputs: reference_median and candidate_median are the per-call device
times with launches hidden (CUDA events around calls queued while the GPU is held, harness 0.4+), and timing_cv is over
those samples. v1 stays computable from a report: the same formula over the launch-inclusive distributions
(`timing.candidate_launch_inclusive`, `timing.baseline_launch_inclusive`).

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
REWARD_V2 = "kernelproof.reward.v2"
CURRENT_REWARD = REWARD_V2
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


def case_reward(reference_median: float, candidate_median: float, timing_cv: float,
                spec: str = CURRENT_REWARD) -> Reward:
    """Reward of a case that passed every gate; v1 and v2 share the formula and differ in the medians fed to it."""
    if spec not in (REWARD_V1, REWARD_V2):
        raise ValueError(f"unknown reward spec {spec!r}")
    s = speed_score(reference_median, candidate_median)
    u = instability(timing_cv)
    return Reward(spec=spec, value=s - u, speed_score=s, instability=u)


def case_reward_v1(reference_median: float, candidate_median: float, timing_cv: float) -> Reward:
    """v1: launch-inclusive medians."""
    return case_reward(reference_median, candidate_median, timing_cv, REWARD_V1)


def failed_case_reward(spec: str = CURRENT_REWARD) -> Reward:
    return Reward(spec=spec, value=FAILURE_REWARD, note="correctness failed")


def failed_case_reward_v1() -> Reward:
    return failed_case_reward(REWARD_V1)


def aggregate_v1(case_rewards: list[float | None], any_failed: bool) -> float | None:
    """Run-level reward; None when no case produced a speed reward (e.g. interpreter runs that all passed)."""
    if any_failed:
        return FAILURE_REWARD
    values = [r for r in case_rewards if r is not None]
    if not values or len(values) != len(case_rewards):
        return None
    return sum(values) / len(values)
