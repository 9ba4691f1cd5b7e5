"""What a run ran on: software versions, the GPU, its clocks and its measured copy bandwidth."""

from __future__ import annotations

import contextlib
import functools
import logging
import platform
import socket
from collections.abc import Callable
from typing import Any

import torch

from kernelproof_core import HARNESS_VERSION
from kernelproof_core.campaign import Device
from kernelproof_core.report.models import Environment, GpuInfo

log = logging.getLogger(__name__)


def triton_version() -> str:
    try:
        import triton

        return str(triton.__version__)
    except Exception:  # triton missing is reported, not fatal for listing
        return "unavailable"


def nvml_readings(index: int = 0) -> dict[str, Any]:
    """Driver, current and maximum SM/memory clocks, temperature and enforced power limit through NVML. Each reading
    is guarded on its own (a GPU may not support one query); empty where NVML is not installed or fails to start."""
    try:
        import pynvml

        pynvml.nvmlInit()
    except Exception as exc:
        log.debug("NVML unavailable: %s", exc)
        return {}
    try:
        from kernelproof_core.measurement.clocks import nvml_handle

        h = nvml_handle(index)
        queries: dict[str, Callable[[], Any]] = {
            "driver": lambda: str(pynvml.nvmlSystemGetDriverVersion()),
            "sm_clock_mhz": lambda: int(pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_SM)),
            "mem_clock_mhz": lambda: int(pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_MEM)),
            "max_sm_clock_mhz": lambda: int(pynvml.nvmlDeviceGetMaxClockInfo(h, pynvml.NVML_CLOCK_SM)),
            "max_mem_clock_mhz": lambda: int(pynvml.nvmlDeviceGetMaxClockInfo(h, pynvml.NVML_CLOCK_MEM)),
            "temperature_c": lambda: int(pynvml.nvmlDeviceGetTemperature(h, pynvml.NVML_TEMPERATURE_GPU)),
            "power_limit_w": lambda: pynvml.nvmlDeviceGetEnforcedPowerLimit(h) / 1000.0,
        }
        readings = {}
        for name, query in queries.items():
            try:
                readings[name] = query()
            except Exception as exc:  # not supported on this GPU or driver
                log.debug("NVML %s unavailable: %s", name, exc)
        return readings
    except Exception as exc:
        log.debug("NVML device unavailable: %s", exc)
        return {}
    finally:
        with contextlib.suppress(Exception):
            pynvml.nvmlShutdown()


@functools.lru_cache(maxsize=4)
def copy_bandwidth_gbps(nbytes: int = 1024**3, repeats: int = 15, use_triton: bool = True,
                        warmup_s: float | None = None) -> float:
    """Device-to-device copy bandwidth counting bytes read plus written (GB/s), measured once per process.

    This is the speed-of-light reference for memory-bound tasks: the best of the driver's memcpy and a vectorised
    Triton copy after a clock warm-up (measurement/copy_reference.py says why one method is not enough).
    """
    from kernelproof_core.measurement.copy_reference import WARMUP_S, measure_copy_gbps

    return max(measure_copy_gbps(nbytes, repeats, use_triton, WARMUP_S if warmup_s is None else warmup_s).values())


def gpu_info(measure_bandwidth: bool = True) -> GpuInfo:
    props = torch.cuda.get_device_properties(torch.cuda.current_device())
    return GpuInfo(
        name=props.name,
        capability=f"{props.major}.{props.minor}",
        sm_count=props.multi_processor_count,
        memory_bytes=props.total_memory,
        l2_bytes=getattr(props, "L2_cache_size", None),
        copy_bandwidth_gbps=copy_bandwidth_gbps() if measure_bandwidth else None,
        **nvml_readings(torch.cuda.current_device()),
    )


def collect_environment(device: Device, measure_bandwidth: bool = True) -> Environment:
    return Environment(
        device=device,
        hostname=socket.gethostname(),
        platform=platform.platform(),
        python=platform.python_version(),
        torch=torch.__version__,
        triton=triton_version(),
        cuda=torch.version.cuda,
        gpu=gpu_info(measure_bandwidth) if device == "cuda" else None,
        harness_version=HARNESS_VERSION,
    )


def resolve_device(requested: str) -> Device:
    """`auto` becomes cuda when a CUDA device is usable, else the Triton interpreter."""
    if requested == "auto":
        return "cuda" if torch.cuda.is_available() else "interpreter"
    if requested not in ("cuda", "interpreter"):
        raise ValueError(f"unknown device {requested!r}")
    return requested  # type: ignore[return-value]
