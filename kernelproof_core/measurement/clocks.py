"""SM clock and slowdown reasons around timed samples (NVML), and the rule that discards throttled samples.

A sample taken while the GPU throttles measures the cooling or the power supply, not the kernel. Around every CUDA
sample (outside its timed region) the SM clock is read before and after, and NVML's clocks-event (formerly
"throttle") reasons after. A sample is throttled when either reading is below `THROTTLE_CLOCK_FRACTION` of the
reference clock (read once per case, right after the warm-ups, when the GPU has just been busy), or when a thermal or
power slowdown reason is active. Both samples of a throttled pair (candidate and baseline) are discarded, so the
comparison stays paired.

NVML is optional: without pynvml, a driver or permission, `ClockMonitor.open` returns a monitor whose readings are
None and nothing is discarded. The NVML functions are bound when this module is imported, before any candidate code
runs, so a candidate that patches pynvml cannot choose which of its samples are discarded.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

log = logging.getLogger(__name__)

THROTTLE_CLOCK_FRACTION = 0.9
# NVML clocks-event reason bits (nvml.h, stable ABI) that mean the clock was lowered by heat or power: SW power cap,
# HW slowdown, SW thermal, HW thermal, HW power brake. Idle, application clocks, sync boost and display are not.
SLOWDOWN_REASONS_MASK = 0x4 | 0x8 | 0x20 | 0x40 | 0x80
NVML_CLOCK_SM = 1  # nvmlClockType_t
NVML_CLOCK_MEM = 2
NVML_TEMPERATURE_GPU = 0

try:  # bound now, before candidate code: see the module docstring
    import pynvml as _pynvml

    _nvml: Any = _pynvml
    _init: Callable[[], None] = _pynvml.nvmlInit
    _shutdown: Callable[[], None] = _pynvml.nvmlShutdown
    _by_index: Callable[[int], Any] = _pynvml.nvmlDeviceGetHandleByIndex
    _by_uuid: Callable[[bytes | str], Any] = _pynvml.nvmlDeviceGetHandleByUUID
    _clock: Callable[[Any, int], int] = _pynvml.nvmlDeviceGetClockInfo
    _temperature: Callable[[Any, int], int] = _pynvml.nvmlDeviceGetTemperature
    _reasons: Callable[[Any], int] | None = getattr(
        _pynvml, "nvmlDeviceGetCurrentClocksEventReasons",
        getattr(_pynvml, "nvmlDeviceGetCurrentClocksThrottleReasons", None))
except ImportError:
    _nvml = None
    _reasons = None


def nvml_available() -> bool:
    return _nvml is not None


def nvml_handle(index: int) -> Any:
    """The NVML handle of CUDA device `index`: matched by UUID (NVML ignores CUDA_VISIBLE_DEVICES, so its indices
    may differ from CUDA's), else by index. Call between nvmlInit and nvmlShutdown."""
    try:
        import torch

        uuid = str(torch.cuda.get_device_properties(index).uuid)
        return _by_uuid(uuid if uuid.startswith("GPU-") else f"GPU-{uuid}")
    except Exception as exc:  # an old torch, or NVML cannot see that UUID
        log.debug("NVML handle by UUID failed (%s); using index %d", exc, index)
        return _by_index(index)


@dataclass(frozen=True, slots=True)
class SampleClock:
    """NVML readings around one sample: SM clock before and after (MHz) and whether a slowdown reason was active."""

    before_mhz: int | None
    after_mhz: int | None
    slowdown: bool

    def throttled(self, reference_mhz: int | None, fraction: float = THROTTLE_CLOCK_FRACTION) -> bool:
        if self.slowdown:
            return True
        if reference_mhz is None:
            return False
        floor = fraction * reference_mhz
        return any(c is not None and c < floor for c in (self.before_mhz, self.after_mhz))


class ClockMonitor:
    """NVML opened once for one case (not per sample); every reading is None where NVML is unavailable."""

    def __init__(self, handle: Any = None, note: str = "NVML unavailable: clocks not recorded") -> None:
        self._handle = handle
        self.note: str | None = None if handle is not None else note

    @classmethod
    def open(cls, index: int) -> ClockMonitor:
        if _nvml is None:
            return cls()
        try:
            _init()
        except Exception as exc:  # no driver, no permission: measure without clocks
            log.debug("NVML unavailable: %s", exc)
            return cls(note=f"NVML unavailable ({type(exc).__name__}): clocks not recorded")
        try:
            return cls(nvml_handle(index))
        except Exception as exc:  # NVML cannot see this device (a sandbox may hide it)
            log.debug("NVML device unavailable: %s", exc)
            with contextlib.suppress(Exception):
                _shutdown()
            return cls(note=f"NVML device unavailable ({type(exc).__name__}): clocks not recorded")

    @property
    def available(self) -> bool:
        return self._handle is not None

    def close(self) -> None:
        if self._handle is not None:
            self._handle = None
            try:
                _shutdown()
            except Exception as exc:
                log.debug("nvmlShutdown failed: %s", exc)

    def __enter__(self) -> ClockMonitor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _read(self, fn: Callable[..., int] | None, *args: int) -> int | None:
        if self._handle is None or fn is None:
            return None
        try:
            return int(fn(self._handle, *args))
        except Exception as exc:  # a query this GPU does not support
            log.debug("NVML query failed: %s", exc)
            return None

    def sm_clock_mhz(self) -> int | None:
        return self._read(_clock, NVML_CLOCK_SM) if _nvml is not None else None

    def mem_clock_mhz(self) -> int | None:
        return self._read(_clock, NVML_CLOCK_MEM) if _nvml is not None else None

    def temperature_c(self) -> int | None:
        return self._read(_temperature, NVML_TEMPERATURE_GPU) if _nvml is not None else None

    def slowdown(self) -> bool:
        """A thermal or power slowdown reason is active now (False when unknown)."""
        reasons = self._read(_reasons)
        return reasons is not None and bool(reasons & SLOWDOWN_REASONS_MASK)


@dataclass(frozen=True, slots=True)
class ClockSummary:
    """What NVML said about one case: the state at the start of sampling, the SM clock range over every reading
    (discarded samples included) and how many sample pairs were discarded as throttled (None: NVML unavailable)."""

    temperature_c_start: int | None = None
    sm_clock_mhz_start: int | None = None
    mem_clock_mhz_start: int | None = None
    sm_clock_mhz_min: int | None = None
    sm_clock_mhz_max: int | None = None
    throttled_samples: int | None = None


def summarize_clocks(start: tuple[int | None, int | None, int | None], readings: list[SampleClock],
                     throttled: int, available: bool) -> ClockSummary:
    """start: (temperature, SM clock, memory clock) read after the warm-ups."""
    seen = [c for r in readings for c in (r.before_mhz, r.after_mhz) if c is not None]
    return ClockSummary(
        temperature_c_start=start[0],
        sm_clock_mhz_start=start[1],
        mem_clock_mhz_start=start[2],
        sm_clock_mhz_min=min(seen) if seen else None,
        sm_clock_mhz_max=max(seen) if seen else None,
        throttled_samples=throttled if available else None,
    )
