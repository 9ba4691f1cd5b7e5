"""Which Triton kernels a candidate launched, on which stream, and which memory they wrote.

Compiled (CUDA): `JITFunction.run` is wrapped while a call is observed, giving each launch's kernel, whether the
candidate's own module defined it, and its tensor arguments; Triton's `launch_enter_hook` sees every launch (also
compiled kernels launched directly) with the stream it went to. Interpreter: `InterpretedFunction.run` is wrapped
the same way, and the interpreter's store and atomic builders record every address an owned kernel wrote, which is
stronger evidence than arguments: the output must be memory the candidate's kernels stored to.

Stores of Triton kernels the candidate did not define (a library's, another module's) are recorded apart under
the interpreter: bytes they computed must not reach the output through the candidate's own kernels.

Wrappers are installed only around observed calls (gate calls), never during timed samples, so they cost honest
kernels nothing there. The originals are captured before any candidate code runs; finding something else installed
when a call is about to be observed means the candidate replaced Triton's launch path (tampering).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from kernelproof_core.errors import CandidateFailure
from kernelproof_core.integrity.dispatch import TensorMeta
from kernelproof_core.verdicts import Verdict


@dataclass(frozen=True, slots=True)
class Launch:
    kernel: str
    owned: bool
    args: tuple[TensorMeta, ...]


@dataclass
class LaunchLog:
    """Everything observed about the launches of one call."""

    owner_names: frozenset[str]
    launches: list[Launch] = field(default_factory=list)  # through JITFunction.run / InterpretedFunction.run
    hooked: list[tuple[str, int | None]] = field(default_factory=list)  # (kernel, stream) from launch_enter_hook
    written: list[np.ndarray] = field(default_factory=list)  # byte addresses owned kernels stored to (interpreter)
    read: list[np.ndarray] = field(default_factory=list)  # byte addresses owned kernels loaded from (interpreter)
    # byte addresses Triton kernels the candidate did not define stored to (interpreter)
    foreign_written: list[np.ndarray] = field(default_factory=list)
    tracks_stores: bool = False
    in_owned_launch: bool = False
    in_foreign_launch: bool = False

    @property
    def owned_names(self) -> set[str]:
        return set(self.owner_names) | {launch.kernel for launch in self.launches if launch.owned}

    @property
    def own_launches(self) -> int:
        if self.hooked:  # compiled: the hook sees every launch, direct ones included
            names = self.owned_names
            return sum(1 for name, _ in self.hooked if name in names)
        return sum(1 for launch in self.launches if launch.owned)

    def foreign_streams(self, expected: int | None) -> list[str]:
        names = self.owned_names
        return [name for name, stream in self.hooked if expected is not None and stream not in (None, expected)
                and name in names]


def _kernel_fn(obj: Any) -> Any:
    """The plain Python function under a JITFunction / InterpretedFunction / Autotuner / Heuristics chain."""
    for _ in range(8):
        inner = getattr(obj, "fn", None)
        if inner is None:
            return obj
        obj = inner
    return obj


def owner_kernel_names(owner: dict[str, Any]) -> frozenset[str]:
    """Names of the Triton kernels defined at the top level of the candidate's module."""
    names = set()
    for value in list(owner.values()):
        fn = _kernel_fn(value)
        if fn is not value and getattr(fn, "__globals__", None) is owner:
            names.add(fn.__name__)
    return frozenset(names)


def _tensor_args(args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[TensorMeta, ...]:
    return tuple(TensorMeta.of(a) for a in (*args, *kwargs.values()) if isinstance(a, torch.Tensor))


class LaunchObserver:
    """Installs and removes the launch wrappers; one observed call at a time per process."""

    def __init__(self) -> None:
        from triton import knobs
        from triton.runtime import interpreter
        from triton.runtime.jit import JITFunction

        self._knobs = knobs
        self._jit = JITFunction
        self._interp = interpreter.InterpretedFunction
        self._builder = interpreter.InterpreterBuilder
        self._originals: dict[tuple[type, str], Callable[..., Any]] = {
            (JITFunction, "run"): JITFunction.run,
            (self._interp, "run"): self._interp.run,
            **{(self._builder, name): getattr(self._builder, name)
               for name in ("create_masked_store", "create_atomic_rmw", "create_atomic_cas", "create_masked_load")},
        }
        self._log: LaunchLog | None = None
        self._owner: dict[str, Any] | None = None

    def intact(self) -> list[str]:
        """Names of Triton launch-path attributes that are not the originals captured before the candidate ran."""
        return [f"{cls.__qualname__}.{name}" for (cls, name), fn in self._originals.items()
                if cls.__dict__.get(name) is not fn]

    def restore(self) -> None:
        """Reinstall Triton's original launch path (after a candidate replaced it, in a process that goes on)."""
        for (cls, name), fn in self._originals.items():
            setattr(cls, name, fn)

    @contextmanager
    def observe(self, owner: dict[str, Any], interpreter: bool) -> Iterator[LaunchLog]:
        replaced = self.intact()
        if replaced:
            raise CandidateFailure(Verdict.TAMPERING, f"Triton's launch path was replaced: {', '.join(replaced)}")
        log = LaunchLog(owner_names=owner_kernel_names(owner), tracks_stores=interpreter)
        self._log, self._owner = log, owner
        wrappers = self._wrappers()
        for (cls, name), wrapper in wrappers.items():
            setattr(cls, name, wrapper)
        self._knobs.runtime.launch_enter_hook.add(self._hook)
        try:
            yield log
        finally:
            self._knobs.runtime.launch_enter_hook.remove(self._hook)
            for (cls, name), fn in self._originals.items():
                setattr(cls, name, fn)
            self._log, self._owner = None, None

    def _owned(self, kernel: Any) -> bool:
        return getattr(_kernel_fn(kernel), "__globals__", None) is self._owner

    def _hook(self, metadata: Any) -> None:
        log = self._log
        data = getattr(metadata, "data", None)  # never .get(): that would run the kernel's launch_metadata callback
        if log is not None and isinstance(data, dict):
            stream = data.get("stream")
            log.hooked.append((str(data.get("name")), int(stream) if isinstance(stream, int) else None))

    def _wrappers(self) -> dict[tuple[type, str], Callable[..., Any]]:
        observer = self
        jit_run = self._originals[(self._jit, "run")]
        interp_run = self._originals[(self._interp, "run")]

        def run_compiled(kernel: Any, *args: Any, grid: Any, warmup: bool, **kwargs: Any) -> Any:
            compiled = jit_run(kernel, *args, grid=grid, warmup=warmup, **kwargs)
            log = observer._log
            if log is not None and not warmup and compiled is not None:
                name = str(getattr(compiled, "name", _kernel_fn(kernel).__name__))
                log.launches.append(Launch(name, observer._owned(kernel), _tensor_args(args, kwargs)))
            return compiled

        def run_interpreted(kernel: Any, *args: Any, grid: Any, warmup: bool, **kwargs: Any) -> Any:
            log = observer._log
            if log is None or warmup:
                return interp_run(kernel, *args, grid=grid, warmup=warmup, **kwargs)
            owned = observer._owned(kernel)
            log.launches.append(Launch(_kernel_fn(kernel).__name__, owned, _tensor_args(args, kwargs)))
            outer = log.in_owned_launch, log.in_foreign_launch
            log.in_owned_launch, log.in_foreign_launch = owned, not owned
            try:
                return interp_run(kernel, *args, grid=grid, warmup=warmup, **kwargs)
            finally:
                log.in_owned_launch, log.in_foreign_launch = outer

        def recording(name: str, ptr_index: int, mask_index: int | None, loads: bool = False) -> Callable[..., Any]:
            original = self._originals[(self._builder, name)]

            def wrapper(builder: Any, *args: Any, **kwargs: Any) -> Any:
                log = observer._log
                if log is not None and (log.in_owned_launch or (log.in_foreign_launch and not loads)):
                    ptrs = args[ptr_index]
                    # As booleans: the interpreter can hand over an int32 mask (`mask & (row < M)` gives one), and
                    # an integer array would index lanes 0 and 1 instead of selecting the lanes it marks.
                    mask = np.asarray(args[mask_index].data).astype(bool) if mask_index is not None else True
                    addrs = ptrs.data[np.broadcast_to(mask, ptrs.data.shape)].astype(np.uint64).ravel()
                    size = max(1, ptrs.get_element_ty().primitive_bitwidth // 8)
                    touched = np.add.outer(addrs, np.arange(size, dtype=np.uint64)).ravel()
                    if log.in_owned_launch:
                        (log.read if loads else log.written).append(touched)
                    else:  # what a kernel the candidate did not define computed
                        log.foreign_written.append(touched)
                return original(builder, *args, **kwargs)

            return wrapper

        return {
            (self._jit, "run"): run_compiled,
            (self._interp, "run"): run_interpreted,
            (self._builder, "create_masked_store"): recording("create_masked_store", 0, 2),
            (self._builder, "create_atomic_rmw"): recording("create_atomic_rmw", 1, 3),
            (self._builder, "create_atomic_cas"): recording("create_atomic_cas", 0, None),
            (self._builder, "create_masked_load"): recording("create_masked_load", 0, 1, loads=True),
        }
