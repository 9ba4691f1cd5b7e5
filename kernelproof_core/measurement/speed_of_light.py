"""Speed of light and launch overhead of one timed case, and the statement of what feeds the reward.

A memory-bound kernel cannot move its task's minimum bytes faster than the memory system copies them, so the
fraction `achieved bandwidth / measured copy bandwidth` says how much is left to gain. It is reported twice: over the
device-time median (events with launches hidden: what the reward sees) and over kernel-only device time (CUPTI),
whose difference is the gaps between a call's kernels. Launch overhead is the launch-inclusive median (ungated
samples) minus kernel-only time: what a caller that waits for each result pays on top of the kernels. The reference
is the device-to-device copy bandwidth (bytes read plus written): the verifying process measures it with a quick
memcpy before the candidate loads (the same probe as the plausibility floor), and the report then takes the better
of that and the environment's measurement (1 GiB, best of memcpy and a Triton copy after a clock warm-up; on the
H200 the quick probe read 3.7-4.15 TB/s where a kernel of ours moved 4.16 TB/s), so a fraction above 1 means a
kernel beat every copy measured, not a weak reference.
"""

from __future__ import annotations

REWARD_INPUT_CUDA = (
    "kernelproof.reward.v2 from CUDA events only: log2(baseline median / candidate median) of the per-call device "
    "time with launches hidden (each sample's calls replayed from a CUDA graph where both implementations capture, "
    "else launched one by one; the GPU is held until the host queued the sample; clipped to +-2), "
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


def rebase(fields: dict[str, float | None], copy_gbps: float | None) -> dict[str, float | None]:
    """The speed-of-light fields recomputed over `copy_gbps` where it beats the reference they used; {} otherwise."""
    used = fields.get("copy_bandwidth_gbps")
    if copy_gbps is None or used is None or copy_gbps <= used:
        return {}
    update: dict[str, float | None] = {"copy_bandwidth_gbps": copy_gbps}
    for achieved, fraction in (("achieved_bandwidth_gbps", "speed_of_light_fraction"),
                               ("kernel_bandwidth_gbps", "speed_of_light_fraction_kernel")):
        value = fields.get(achieved)
        update[fraction] = value / copy_gbps if value is not None else None
    return update
