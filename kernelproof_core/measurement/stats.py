"""Summary statistics of timing samples."""

from __future__ import annotations

import statistics

from kernelproof_core.report.models import Distribution


def percentile(sorted_values: list[float], q: float) -> float:
    """Linear-interpolated percentile (q in [0, 100]) of already sorted values."""
    if not sorted_values:
        raise ValueError("no samples")
    pos = (len(sorted_values) - 1) * q / 100.0
    lo = int(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


def summarize(samples_us: list[float]) -> Distribution:
    """Median, p95, min, max, mean and coefficient of variation, plus the raw samples (microseconds)."""
    ordered = sorted(samples_us)
    mean = statistics.fmean(ordered)
    cv = statistics.pstdev(ordered) / mean if len(ordered) > 1 and mean > 0 else 0.0
    return Distribution(
        count=len(ordered),
        median=statistics.median(ordered),
        p95=percentile(ordered, 95),
        min=ordered[0],
        max=ordered[-1],
        mean=mean,
        cv=cv,
        samples=list(samples_us),
    )
