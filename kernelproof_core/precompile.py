"""Building a candidate's Triton kernels ahead of its verification, in a process that has no GPU.

Compile is the biggest part of a quick verification (about 1.25 s of 2.9 s on the H200: benchmarks/NOTES.md) and
needs no GPU: Triton's CUDA backend turns a kernel into an sm_90 cubin with its own bundled ptxas. A precompile
child (sandbox/child.py) runs this module while other candidates are timed: it calls the candidate's entry point
on every planned case's inputs, built on the CPU, with Triton's JIT switched to compile-only (`compile_only`): the
active driver answers the questions the JIT asks (target, device 0, stream 0) for the probed GPU's target, every
kernel launch becomes a `warmup` (compile, no launch) plus the build of the kernel's C launcher, and an autotuner
compiles every config instead of benchmarking. The kernels land in the child's own Triton cache; its entries go to
the candidate's verification child, whose compile phase then reads them instead of building them
(sandbox/triton_cache.py).

The inputs have the planned cases' shapes, strides and dtypes (all a kernel is specialised on) but values from a
fresh random seed: this process learns nothing about the data the candidate will be checked on. A wrapper that
asks CUDA anything (device properties, `torch.cuda.*`), launches torch work on a GPU or chooses its kernels by
device type fails or compiles less here: that call is recorded and skipped, and the verification child compiles
what is missing itself. Nothing here decides a verdict.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import torch

from kernelproof_core.campaign import Campaign, CandidateJob
from kernelproof_core.candidate import load_candidate
from kernelproof_core.dtypes import parse_dtype
from kernelproof_core.integrity.run import enforce_policy
from kernelproof_core.pipeline import planned_cases
from kernelproof_core.tasks import get_task

log = logging.getLogger(__name__)
MAX_FAILURE_CHARS = 300


@dataclass
class PrecompileSummary:
    """What one precompile did: candidate calls made, the calls that raised ("dtype/case: error"), and the kernel
    launchers that could not be built (a host without the CUDA driver library cannot link them)."""

    calls: int = 0
    failed: list[str] = field(default_factory=list)
    launcher_errors: list[str] = field(default_factory=list)


class CompileOnlyDriver:
    """The answers Triton's JIT needs from its active driver to compile for `target`, with no GPU behind them.
    Whatever would load or launch code (or benchmark it) raises: under `compile_only` nothing gets that far."""

    def __init__(self, backend: str, arch: int, warp_size: int) -> None:
        from triton.backends.compiler import GPUTarget

        self.target = GPUTarget(backend, arch, warp_size)

    def is_active(self) -> bool:
        return True

    def get_current_target(self) -> Any:
        return self.target

    def get_current_device(self) -> int:
        return 0

    def get_current_stream(self, device: int | None = None) -> int:
        return 0

    def get_active_torch_device(self) -> torch.device:
        return torch.device("cpu")

    def __getattr__(self, name: str) -> Any:
        raise RuntimeError(f"no GPU while compiling ahead: the driver has no {name!r}")


def build_launcher(kernel: Any) -> None:
    """Build (and cache) the C launcher Triton makes for each kernel signature the first time it loads the kernel:
    a gcc run of 0.1-0.3 s, more than a small kernel's own compile. Linking it needs the CUDA driver library on
    disk (not a GPU: loading the library starts nothing)."""
    from triton.backends.nvidia.driver import CudaLauncher

    CudaLauncher(kernel.src, kernel.metadata)


@contextmanager
def compile_only(backend: str, arch: int, warp_size: int,
                 launcher_errors: list[str] | None = None) -> Iterator[None]:
    """Within this block every Triton launch only compiles, for the given target (and builds the kernel's launcher,
    noting into `launcher_errors` why it could not), and autotuners compile all of their (pruned) configs without
    timing any."""
    from triton.runtime import driver
    from triton.runtime.autotuner import Autotuner
    from triton.runtime.jit import JITFunction

    launch, tune = JITFunction.run, Autotuner.run
    active = driver._active  # restored as it was: reset_active() would create the real driver, needing a GPU

    def compile_instead(self: Any, *args: Any, grid: Any, warmup: bool, **kwargs: Any) -> Any:
        kernel = launch(self, *args, grid=grid, warmup=True, **kwargs)
        if kernel is not None and backend == "cuda":
            try:
                build_launcher(kernel)
            except Exception as exc:  # the verification builds it then
                error = f"{type(exc).__name__}: {exc}"[:MAX_FAILURE_CHARS]
                if launcher_errors is not None and error not in launcher_errors:
                    launcher_errors.append(error)
        return kernel

    def compile_every_config(self: Any, *args: Any, **kwargs: Any) -> Any:
        self.nargs = dict(zip(self.arg_names, args, strict=False))
        try:
            configs = self.prune_configs(kwargs) if len(self.configs) > 1 else self.configs
            return [self.fn.run(*args, **kwargs, **config.all_kwargs()) for config in configs]
        finally:
            self.nargs = None

    JITFunction.run = compile_instead
    Autotuner.run = compile_every_config
    driver.set_active(CompileOnlyDriver(backend, arch, warp_size))
    try:
        yield
    finally:
        JITFunction.run = launch
        Autotuner.run = tune
        driver._active = active


def precompile_candidate(job: CandidateJob, campaign: Campaign, backend: str, arch: int,
                         warp_size: int) -> PrecompileSummary:
    """Load the candidate and call it once per planned (dtype, case) on CPU inputs under `compile_only`.
    A candidate that the static policy refuses or that fails to load raises CandidateFailure (its verification
    will say why)."""
    task = get_task(job.task)
    summary = PrecompileSummary()
    seed = secrets.randbits(62)  # not the campaign's: the values must tell this process nothing
    if campaign.static_policy:  # code its verification would refuse to load does not run here either
        enforce_policy(job.source)
    with compile_only(backend, arch, warp_size, summary.launcher_errors):
        loaded = load_candidate(job.source, job.filename)
        for name in campaign.dtypes:
            dtype = parse_dtype(name)
            for case in planned_cases(task, campaign):
                inputs = task.make_inputs(case, dtype, torch.device("cpu"), torch.Generator().manual_seed(seed))
                summary.calls += 1
                try:
                    loaded.fn(*inputs)
                except Exception as exc:  # the verification child compiles this case's kernels itself
                    summary.failed.append(f"{name}/{case.case_id}: {type(exc).__name__}: {exc}"[:MAX_FAILURE_CHARS])
    log.info("precompiled %d calls, %d failed; launcher errors: %s", summary.calls, len(summary.failed),
             summary.launcher_errors or "none")
    return summary


__all__ = ["CompileOnlyDriver", "PrecompileSummary", "compile_only", "precompile_candidate"]
