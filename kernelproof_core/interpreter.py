"""Running Triton kernels on a CPU under the Triton interpreter (TRITON_INTERPRET=1).

Two adaptations make candidates written for GPUs run unchanged there:
- the flag is set before any candidate module executes, because @triton.jit reads it when a kernel is defined;
- @triton.autotune benchmarks configs through the active GPU driver, and the interpreter has none ("0 active
  drivers"), so autotuners without a benchmarker of their own get a wall-clock one: each config runs once and the
  fastest on the CPU wins. The choice has no bearing on verdicts (every config must be correct) and interpreter
  timings never feed a reward.
"""

from __future__ import annotations

import functools
import os
import time
from collections.abc import Callable, Sequence
from typing import Any


def _wall_clock_bench(kernel_call: Callable[[], Any], quantiles: Sequence[float] | None = None) -> list[float]:
    t0 = time.perf_counter()
    kernel_call()
    ms = (time.perf_counter() - t0) * 1e3
    return [ms] * len(quantiles) if quantiles else [ms]


def compiled_mode_fixed() -> bool:
    """True when Triton was imported in compiled mode: its own @jit helpers (tl.max, ...) are then compiled-mode
    objects, and switching the process to the interpreter would break every kernel using them."""
    import sys

    return "triton" in sys.modules and os.environ.get("TRITON_INTERPRET") != "1"


def interpret_if_asked(device: str) -> None:
    """A command about to verify in this process on `device` ("auto", "cuda" or "interpreter"): where that is the
    interpreter (asked for, or auto without CUDA), switch to it now, before anything imports Triton (the tasks do).
    Triton builds its own @jit helpers in one mode at import, so a later switch would fail every candidate."""
    from kernelproof_core.environment import resolve_device

    if device in ("auto", "interpreter") and resolve_device(device) == "interpreter":
        enable_interpreter()


@functools.cache
def enable_interpreter() -> None:
    """Switch this process to the Triton interpreter (idempotent; one-way: a process is interpreted or compiled)."""
    os.environ["TRITON_INTERPRET"] = "1"
    from triton.runtime import autotuner

    def do_bench(self: Any) -> Callable[..., Any]:
        return self._do_bench if self._do_bench is not None else _wall_clock_bench

    autotuner.Autotuner.do_bench = property(do_bench)
