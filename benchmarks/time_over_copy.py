"""Where a campaign's time goes beyond copy speed: per timed case, its median minus the time its minimum bytes take at
the run's copy bandwidth, against what 90% of copy allows.

A kernel reaches 90% of copy only if its time over that ideal is at most a ninth of the ideal. A cost that does not
shrink with the size (the first bytes' latency, the last round of rows, the drain of the last stores, the gap between
calls) fits that allowance at large sizes and not at small ones, so the column says which cases of 64 MB or more
miss the bar by a fixed cost and which by throughput: the same `over` at 268 MB and at 1 GB is fixed, an `over` that
grows with the size is throughput. Reads a report written by `kernelproof run` (JSON, or the evidence's .json.gz).

    python benchmarks/time_over_copy.py REPORT [--min-mb 16] [--task softmax] [--dtype bfloat16]
"""

from __future__ import annotations

import argparse
import gzip
import json
from pathlib import Path
from typing import Any

TARGET = 0.9  # issue 6, part 3: 90% of copy at working sets of 64 MB and more


def load(path: Path) -> dict[str, Any]:
    raw = path.read_bytes()
    report: dict[str, Any] = json.loads(gzip.decompress(raw) if path.suffix == ".gz" else raw)
    return report


def rows(report: dict[str, Any], min_mb: float = 16.0) -> list[dict[str, Any]]:
    """One row per timed case of at least `min_mb` MB: median and kernel time, the copy-speed ideal, the time over
    it (events and kernel) and the allowance at 90%. Copy speed is each case's own reference (the report's
    `timing.copy_bandwidth_gbps`, which its speed-of-light fraction uses too)."""
    out = []
    for case in report["cases"]:
        timing = case.get("timing")
        if not timing or not timing.get("min_bytes") or timing["min_bytes"] < min_mb * 1e6:
            continue
        ideal_us = timing["min_bytes"] / (timing["copy_bandwidth_gbps"] * 1e3)
        median, kernel = timing["candidate"]["median"], timing.get("candidate_device_us")
        out.append({"task": case["task"], "dtype": case["dtype"], "case_id": case["case_id"],
                    "shape": "x".join(str(v) for v in case["dims"].values()), "mb": timing["min_bytes"] / 1e6,
                    "median_us": median, "kernel_us": kernel, "ideal_us": ideal_us, "over_us": median - ideal_us,
                    "kernel_over_us": None if kernel is None else kernel - ideal_us,
                    "allowed_us": ideal_us * (1 / TARGET - 1), "pct_of_copy": 100 * ideal_us / median})
    return sorted(out, key=lambda r: (r["task"], r["dtype"], r["mb"]))


def bar(report: dict[str, Any], min_mb: float = 64.0) -> tuple[int, int, list[str]]:
    """Issue 6's bar over a report: timed cases of at least `min_mb` MB, how many reach TARGET of copy by both the
    events and the kernel time (the report's own fractions), and the others as "task dtype case"."""
    timed = [c for c in report["cases"] if c.get("timing") and (c["timing"].get("min_bytes") or 0) >= min_mb * 1e6]
    missed = [f"{c['task']} {c['dtype']} {c['case_id']}" for c in timed
              if min(c["timing"].get("speed_of_light_fraction") or 0.0,
                     c["timing"].get("speed_of_light_fraction_kernel") or 0.0) < TARGET]
    return len(timed), len(timed) - len(missed), missed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("report", type=Path)
    parser.add_argument("--min-mb", type=float, default=16.0)
    parser.add_argument("--task")
    parser.add_argument("--dtype")
    args = parser.parse_args()
    report = load(args.report)
    print(f"GPU copy {report['environment']['gpu']['copy_bandwidth_gbps']:.0f} GB/s; over = median - min bytes / "
          f"the case's copy bandwidth; allowed = what {TARGET:.0%} of copy leaves")
    print(f"{'task':<9} {'dtype':<9} {'case':<18} {'shape':<12} {'MB':>7} {'median':>8} {'ideal':>8} {'over':>7} "
          f"{'kern over':>9} {'allowed':>7} {'% copy':>6}")
    for r in rows(report, args.min_mb):
        if (args.task and r["task"] != args.task) or (args.dtype and r["dtype"] != args.dtype):
            continue
        kern = "" if r["kernel_over_us"] is None else f"{r['kernel_over_us']:.2f}"
        print(f"{r['task']:<9} {r['dtype']:<9} {r['case_id']:<18} {r['shape']:<12} {r['mb']:>7.1f} "
              f"{r['median_us']:>8.2f} {r['ideal_us']:>8.2f} {r['over_us']:>7.2f} {kern:>9} {r['allowed_us']:>7.2f} "
              f"{r['pct_of_copy']:>6.1f}")
    total, reached, missed = bar(report)
    print(f"cases of 64 MB or more: {reached} of {total} at {TARGET:.0%} of copy or more by events and kernel time"
          + (f"; under it: {', '.join(missed)}" if missed else ""))


if __name__ == "__main__":
    main()
