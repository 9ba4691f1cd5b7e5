"""Speed of light and launch overhead of one timed case, and the statement of what feeds the reward.

A memory-bound kernel cannot move its task's minimum bytes faster than the memory system copies them, so the
fraction `achieved bandwidth / measured copy bandwidth` says how much is left to gain. It is reported twice: over the
device-time median (events with launches hidden: what the reward sees) and over kernel-only device time (CUPTI),
whose difference is the gaps between a call's kernels. Launch overhead is the launch-inclusive median (ungated
samples) minus kernel-only time: what a caller that waits for each result pays on top of the kernels. The reference
is the device-to-device copy bandwidth (bytes read plus written) measured in the verifying process before the
candidate loaded: the same probe as the plausibility floor.
"""

from __future__ import annotations

REWARD_INPUT_CUDA = (
    "kernelproof.reward.v2 from CUDA events only: log2(baseline median / candidate median) of the per-call device "
    "time with launches hidden (a GPU sleep ahead of each sample lets the host queue its calls; clipped to +-2), "
    "minus a penalty on the candidate's coefficient of variation above 0.05; medians and cv over the kept samples "
    "(throttled pairs discarded). Launch-inclusive latency, kernel-only time and bandwidth are reported, not used."
)


def gbps(nbytes: int, time_us: float | None) -> float | None:
    """Bytes over time in GB/s; None without a positive time."""
    if time_us is None or time_us <= 0:
        return None
    return nbytes / (time_us * 1e-6) / 1e9


def speed_of_light(min_bytes: int, latency_us: float | None, kernel_us: float | None,
                   copy_gbps: float | None, inclusive_us: float | None = None) -> dict[str, float | None]:
    """Timing fields: achieved bandwidth and its fraction of `copy_gbps`, over the device-time median and over
    kernel-only time, and the launch overhead (launch-inclusive median minus kernel-only time). Fields are None where
    an input is missing; all are None without a latency (interpreter timings are not GPU time)."""
    if latency_us is None:
        kernel_us, copy_gbps, inclusive_us = None, None, None
    reference = copy_gbps if copy_gbps is not None and copy_gbps > 0 else None
    achieved = gbps(min_bytes, latency_us)
    kernel = gbps(min_bytes, kernel_us)
    return {
        "achieved_bandwidth_gbps": achieved,
        "kernel_bandwidth_gbps": kernel,
        "copy_bandwidth_gbps": reference,
        "speed_of_light_fraction": achieved / reference if achieved is not None and reference else None,
        "speed_of_light_fraction_kernel": kernel / reference if kernel is not None and reference else None,
        "launch_overhead_us": inclusive_us - kernel_us if inclusive_us is not None and kernel_us is not None else None,
    }
