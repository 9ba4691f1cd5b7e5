"""Physical plausibility of a timing, and persisting-L2 control.

Every task declares the fewest bytes a correct implementation must move through device memory and its FLOPs. A
median per-call time below `min_bytes / (MAX_BANDWIDTH_FACTOR x measured copy bandwidth)` (or below
`flops / MAX_FLOPS_PER_S`) cannot come from doing the work: it is `implausible_timing`, never a reward. The copy
bandwidth is measured in the verifying process before the candidate is loaded; the factor (1.5) sits above the
H200's theoretical peak (4.8 TB/s against ~4 TB/s measured copy), so an honest kernel is never near it, while the
L2 flush and input rotation keep honest timings HBM-bound for every case large enough for the floor to matter.

Work outside the timed region: each sample's calls are queued while the caller's stream is held (a wait kernel or a
GPU sleep: launches hidden, measurement/launch_gate.py), so work put on another stream could run during that hold,
before the start event. Kernels of one stream run one after another, so the time the GPU is busy with them (CUPTI:
per stream the union of their intervals, which counts once the wait of a kernel launched early by programmatic
dependent launch; summed over every stream) cannot exceed the event-timed device time that brackets them; a
candidate whose kernel time does, by more than MAX_KERNEL_OVER_EVENTS, ran work outside the bracket: `tampering`.

Persisting L2 (cudaAccessPolicyWindow) could keep a working set resident across the flush. The measurement sets the
persisting-L2 limit to zero, resets persisting lines before every flush, and treats a limit changed by the
candidate as `tampering`. This uses the CUDA driver API (libcuda, always present next to a GPU) through ctypes.
The check fails closed: with a driver present, a limit that cannot be read, before the samples or after one, is
`infra_error` (the record cannot vouch for the samples), never a pass; a driver that cannot set it to zero is
logged and the limit still checked. Only a process without a CUDA driver (the interpreter) runs without it.
"""

from __future__ import annotations

import ctypes
import logging

from kernelproof_core.errors import CandidateFailure, InfraError
from kernelproof_core.verdicts import Verdict

log = logging.getLogger(__name__)

MAX_BANDWIDTH_FACTOR = 1.5
MAX_FLOPS_PER_S = 2e15  # no single GPU does 2 PFLOP/s of the FP32 vector math these tasks need (H200: 67 TFLOP/s)
MAX_KERNEL_OVER_EVENTS = 1.10  # CUPTI kernel time over the event median; honest: <= 1 (gaps add, never subtract)
KERNEL_OVER_EVENTS_SLACK_US = 1.0
CU_LIMIT_PERSISTING_L2_CACHE_SIZE = 0x06
CU_DEVICE_ATTRIBUTE_MAX_PERSISTING_L2_CACHE_SIZE = 108
CUDA_DRIVER_LIBRARY = "libcuda.so.1"


def copy_bandwidth_ceiling_gbps(probe_bytes: int) -> float:
    """Measured device copy bandwidth (read + write, GB/s); call before any candidate code runs."""
    from kernelproof_core.environment import copy_bandwidth_gbps

    # Paid by every verifying process before the candidate loads, and used times 1.5 as a ceiling: memcpy after three
    # warm-up copies is enough (the speed-of-light reference in the environment block takes the slower, best-of route).
    return copy_bandwidth_gbps(probe_bytes, 10, use_triton=False, warmup_s=0.0)


def time_floor_us(min_bytes: int, flops: int, copy_gbps: float) -> float:
    """The fastest a call doing the task's work can physically take, per the module docstring."""
    bytes_floor = min_bytes / (copy_gbps * 1e9 * MAX_BANDWIDTH_FACTOR) * 1e6
    return max(bytes_floor, flops / MAX_FLOPS_PER_S * 1e6)


def check_plausible(median_us: float, floor_us: float, min_bytes: int) -> None:
    if median_us < floor_us:
        implied = min_bytes / (median_us * 1e-6) / 1e9 if median_us > 0 else float("inf")
        raise CandidateFailure(
            Verdict.IMPLAUSIBLE_TIMING,
            f"median {median_us:.3f} us per call is below the physical floor of {floor_us:.3f} us: moving the "
            f"task's {min_bytes} bytes that fast needs {implied:.0f} GB/s, more than the device can deliver",
        )


def check_timed_region(event_median_us: float, kernel_us: float) -> None:
    """Kernel time must fit inside the events that timed it (see the module docstring)."""
    if kernel_us > MAX_KERNEL_OVER_EVENTS * event_median_us + KERNEL_OVER_EVENTS_SLACK_US:
        raise CandidateFailure(
            Verdict.TAMPERING,
            f"the call's kernels took {kernel_us:.2f} us (CUPTI, every stream) but the events that bracket them saw "
            f"{event_median_us:.2f} us: work ran outside the timed region (another stream)",
        )


class PersistingL2:
    """The current CUDA context's persisting-L2 state. Every method is a no-op when the driver API is missing."""

    def __init__(self) -> None:
        self._lib: ctypes.CDLL | None = None
        self._context: int | None = None  # set by bind()
        try:
            self._lib = ctypes.CDLL(CUDA_DRIVER_LIBRARY)
        except OSError as exc:
            log.warning("persisting-L2 control unavailable: %s", exc)

    @property
    def available(self) -> bool:
        return self._lib is not None

    def disable(self) -> bool:
        """Limit persisting lines to zero bytes; True on success."""
        if self._lib is None:
            return False
        status = self._lib.cuCtxSetLimit(ctypes.c_int(CU_LIMIT_PERSISTING_L2_CACHE_SIZE), ctypes.c_size_t(0))
        if status != 0:
            log.warning("cuCtxSetLimit(persisting L2, 0) failed with CUresult %s", status)
        return status == 0

    def reset(self) -> None:
        """Demote every persisting line to normal, so the next flush evicts it."""
        if self._lib is not None:
            self._lib.cuCtxResetPersistingL2Cache()

    def limit(self) -> int | None:
        """The current context's persisting-L2 limit in bytes; None without a driver or when the read fails."""
        if self._lib is None:
            return None
        value = ctypes.c_size_t(0)
        status = self._lib.cuCtxGetLimit(ctypes.byref(value), ctypes.c_int(CU_LIMIT_PERSISTING_L2_CACHE_SIZE))
        if status != 0:
            log.warning("cuCtxGetLimit(persisting L2) failed with CUresult %s", status)
            return None
        return int(value.value)

    def max_bytes(self) -> int | None:
        """The most the current device lets a context set aside for persisting lines (0: none, as under MIG)."""
        if self._lib is None:
            return None
        device, value = ctypes.c_int(0), ctypes.c_int(0)
        if self._lib.cuCtxGetDevice(ctypes.byref(device)) != 0 or self._lib.cuDeviceGetAttribute(
                ctypes.byref(value), ctypes.c_int(CU_DEVICE_ATTRIBUTE_MAX_PERSISTING_L2_CACHE_SIZE), device) != 0:
            return None
        return int(value.value)

    def context(self) -> int | None:
        """The calling thread's current CUDA context (its handle), which every limit call above acts on."""
        if self._lib is None:
            return None
        handle = ctypes.c_void_p(0)
        return handle.value if self._lib.cuCtxGetCurrent(ctypes.byref(handle)) == 0 else None

    def bind(self) -> None:
        """Remember the current context, before any candidate code runs: a candidate that later made another one
        current would have the checks read that one's limit while its kernels ran in the first."""
        self._context = self.context()

    def arm(self) -> bool:
        """Set the limit to zero before the samples; True when it will be checked after each (a driver is present).
        A driver whose limit does not read is `infra_error`: the samples could not be vouched for."""
        if self._lib is None:
            return False
        if self._context is None:
            self.bind()
        self.disable()
        if self.limit() is None:
            raise InfraError("the persisting-L2 limit cannot be read in this CUDA context: L2 persistence across the "
                             "flush could not be ruled out")
        return True

    def verify_disabled(self) -> None:
        """`tampering` if the limit was raised; `infra_error` if it can no longer be read (see the module doc)."""
        if self._context is not None and self.context() != self._context:
            raise CandidateFailure(Verdict.TAMPERING, "the current CUDA context changed during the measurement: the "
                                   "persisting-L2 checks would read another context's limit")
        limit = self.limit()
        if limit is None:
            if self._lib is None:
                return
            raise InfraError("the persisting-L2 limit could not be read after a sample: the record cannot vouch "
                             "for the samples")
        if limit:
            raise CandidateFailure(Verdict.TAMPERING, f"the persisting-L2 limit was raised to {limit} bytes: L2 "
                                   "persistence keeps data resident across the flush between timing samples")
