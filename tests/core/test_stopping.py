"""Adaptive stopping: the RSE estimator and the stop decision, on synthetic sample sequences."""

from __future__ import annotations

import math
import random
import statistics

import pytest
from pydantic import ValidationError

from kernelproof_core.measurement.stopping import StoppedBy, StoppingRule, median_rse, stop_reason


def _normal(n: int, mean: float, sd: float, seed: int) -> list[float]:
    rng = random.Random(seed)
    return [rng.gauss(mean, sd) for _ in range(n)]


def test_median_rse_matches_the_normal_theory() -> None:
    """sqrt(pi/2) * sigma / sqrt(n) / median, within sampling error of the MAD."""
    xs = _normal(4000, 100.0, 2.0, seed=1)
    expected = math.sqrt(math.pi / 2) * 2.0 / math.sqrt(4000) / 100.0
    assert median_rse(xs) == pytest.approx(expected, rel=0.05)


def test_median_rse_agrees_with_the_spread_of_medians() -> None:
    """The estimate is the real standard error: compare with the spread of medians over independent runs."""
    n, sd = 200, 3.0
    medians = [statistics.median(_normal(n, 50.0, sd, seed=s)) for s in range(400)]
    observed = statistics.pstdev(medians) / 50.0
    estimates = [median_rse(_normal(n, 50.0, sd, seed=1000 + s)) for s in range(50)]
    assert statistics.fmean(estimates) == pytest.approx(observed, rel=0.2)


def test_median_rse_ignores_rare_outliers() -> None:
    """One preempted sample in a hundred does not move the median, so it must not move its standard error much."""
    xs = _normal(100, 10.0, 0.1, seed=2)
    with_outlier = [*xs[:-1], 1000.0]
    assert median_rse(with_outlier) == pytest.approx(median_rse(xs), rel=0.1)
    sd_based = math.sqrt(math.pi / 2) * statistics.stdev(with_outlier) / 10.0 / statistics.median(with_outlier)
    assert median_rse(with_outlier) < sd_based / 50  # what the standard deviation would have claimed


def test_median_rse_degenerate_inputs() -> None:
    assert median_rse([]) == math.inf and median_rse([1.0, 2.0]) == math.inf
    assert median_rse([0.0, 0.0, 0.0]) == math.inf
    assert median_rse([5.0, 5.0, 5.0, 5.0]) == 0.0


def _run(rule: StoppingRule, cand_sd: float, base_sd: float, seconds_per_pair: float = 0.001,
         measured_per_pair: float = 0.0005) -> tuple[StoppedBy, int]:
    """Drive the rule as measure_cuda does: batches of pairs, a check after each."""
    cand, base = _normal(rule.max_samples, 10.0, cand_sd, 3), _normal(rule.max_samples, 20.0, base_sd, 4)
    taken = 0
    while True:
        taken = min(taken + rule.batch_samples, rule.max_samples)
        reason = stop_reason(rule, cand[:taken], base[:taken], taken=taken, measured_s=taken * measured_per_pair,
                             elapsed_s=taken * seconds_per_pair)
        if reason is not None:
            return reason, taken


def test_quiet_samples_stop_by_noise_target_after_the_minimum() -> None:
    rule = StoppingRule(target_rse=0.005, min_samples=30)
    reason, taken = _run(rule, cand_sd=0.01, base_sd=0.02)
    assert reason == "noise_target" and taken == 30


def test_noisier_samples_need_more_of_them() -> None:
    """sd 1% of the median: RSE ~ 1.2533 * 1% / sqrt(n), so 0.1% needs about (1.2533 * 10)^2 = 157 pairs."""
    rule = StoppingRule(target_rse=0.001, min_samples=10)
    reason, taken = _run(rule, cand_sd=0.1, base_sd=0.05)  # 1% and 0.25% of the medians
    assert reason == "noise_target"
    expected = (math.sqrt(math.pi / 2) * 0.01 / 0.001) ** 2  # ~157 pairs for the candidate
    assert 0.6 * expected <= taken <= 1.6 * expected
    cand = _normal(rule.max_samples, 10.0, 0.1, 3)[:taken]
    assert median_rse(cand) <= 0.001 < median_rse(cand[: taken - 2 * rule.batch_samples])


def test_both_medians_must_reach_the_target() -> None:
    rule = StoppingRule(target_rse=0.002, min_samples=10)
    quiet = _run(rule, cand_sd=0.001, base_sd=0.001)[1]
    noisy_baseline = _run(rule, cand_sd=0.001, base_sd=0.5)[1]  # 2.5% of the baseline median
    assert noisy_baseline > 5 * quiet


def test_minimum_measured_time_holds_a_quiet_run() -> None:
    rule = StoppingRule(target_rse=0.01, min_samples=10, min_measured_s=0.2)
    reason, taken = _run(rule, cand_sd=0.001, base_sd=0.001, measured_per_pair=0.001)
    assert reason == "noise_target" and taken == 200


def test_time_cap_and_max_samples() -> None:
    hopeless = dict(target_rse=1e-6, min_samples=10)
    reason, taken = _run(StoppingRule(**hopeless, max_measure_s=0.5), 1.0, 1.0, seconds_per_pair=0.01)
    assert reason == "time_cap" and taken == 50
    reason, taken = _run(StoppingRule(**hopeless, max_samples=95, batch_samples=10), 1.0, 1.0)
    assert reason == "max_samples" and taken == 95


def test_noise_target_wins_over_a_cap_reached_at_the_same_check() -> None:
    rule = StoppingRule(target_rse=0.01, min_samples=10, max_samples=10)
    xs = [1.0] * 10
    assert stop_reason(rule, xs, xs, taken=10, measured_s=0.0, elapsed_s=1e9) == "noise_target"


def test_throttled_pairs_do_not_count_towards_the_minimum() -> None:
    """`taken` may exceed the kept samples: the minimum is on kept ones."""
    rule = StoppingRule(target_rse=0.5, min_samples=20)
    kept = [1.0] * 15
    assert stop_reason(rule, kept, kept, taken=40, measured_s=1.0, elapsed_s=0.0) is None


@pytest.mark.parametrize("bad", [dict(target_rse=0), dict(target_rse=1.5), dict(target_rse=0.01, min_samples=2),
                                 dict(target_rse=0.01, min_samples=50, max_samples=40),
                                 dict(target_rse=0.01, max_measure_s=0), dict(target_rse=0.01, unknown=1)])
def test_invalid_rules_are_refused(bad: dict[str, float]) -> None:
    with pytest.raises(ValidationError):
        StoppingRule(**bad)  # type: ignore[arg-type]
