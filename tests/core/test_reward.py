"""Golden values of kernelproof.reward.v1 and v2 (one frozen formula over different medians; never change)."""

from __future__ import annotations

import math

import pytest

from kernelproof_core.reward import (
    CURRENT_REWARD,
    REWARD_V1,
    REWARD_V2,
    aggregate_v1,
    case_reward,
    case_reward_v1,
    failed_case_reward,
    failed_case_reward_v1,
)


@pytest.mark.parametrize(
    ("ref", "cand", "cv", "speed", "instab", "reward"),
    [
        (100.0, 100.0, 0.0, 0.0, 0.0, 0.0),  # as fast as eager
        (200.0, 100.0, 0.01, 1.0, 0.0, 1.0),  # 2x faster, stable
        (100.0, 200.0, 0.05, -1.0, 0.0, -1.0),  # 2x slower; cv at the free threshold
        (1000.0, 10.0, 0.0, 2.0, 0.0, 2.0),  # 100x faster: clipped at +2
        (10.0, 1000.0, 0.0, -2.0, 0.0, -2.0),  # 100x slower: clipped at -2
        (300.0, 100.0, 0.10, math.log2(3), 0.1, math.log2(3) - 0.1),  # cv 0.10: 2 * 0.05 penalty
        (300.0, 100.0, 0.30, math.log2(3), 0.5, math.log2(3) - 0.5),  # penalty capped at 0.5
        (150.0, 100.0, 0.20, math.log2(1.5), 0.3, math.log2(1.5) - 0.3),
    ],
)
def test_case_reward_golden(ref: float, cand: float, cv: float, speed: float, instab: float, reward: float) -> None:
    r = case_reward_v1(ref, cand, cv)
    assert r.spec == REWARD_V1 == "kernelproof.reward.v1"
    assert r.speed_score == pytest.approx(speed, abs=1e-12)
    assert r.instability == pytest.approx(instab, abs=1e-12)
    assert r.value == pytest.approx(reward, abs=1e-12)
    v2 = case_reward(ref, cand, cv)
    assert v2.spec == REWARD_V2 == CURRENT_REWARD == "kernelproof.reward.v2"
    assert (v2.value, v2.speed_score, v2.instability) == (r.value, r.speed_score, r.instability)


def test_failure_is_exactly_minus_one() -> None:
    assert failed_case_reward_v1().value == -1.0
    assert failed_case_reward().value == -1.0 and failed_case_reward().spec == REWARD_V2


def test_unknown_spec_is_rejected() -> None:
    with pytest.raises(ValueError, match="unknown reward spec"):
        case_reward(2.0, 1.0, 0.0, "kernelproof.reward.v0")


def test_aggregate_rule() -> None:
    assert aggregate_v1([1.0, 0.5, -0.5], any_failed=False) == pytest.approx(1.0 / 3)
    assert aggregate_v1([2.0, 2.0], any_failed=True) == -1.0
    assert aggregate_v1([None, None], any_failed=False) is None  # interpreter: no speed reward
    assert aggregate_v1([1.0, None], any_failed=False) is None


def test_nonpositive_medians_are_rejected() -> None:
    with pytest.raises(ValueError):
        case_reward_v1(0.0, 1.0, 0.0)
