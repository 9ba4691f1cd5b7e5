"""Choosing where candidate code runs. Callers ask for a sandbox or not; they never construct executors directly."""

from __future__ import annotations

from kernelproof_core.verify import Executor, InProcessExecutor


def make_executor(sandbox: bool = True, overlap: int = 1) -> Executor:
    """The sandboxed runner by default; the in-process executor only for trusted local debugging. `overlap` > 1:
    that many sandboxed candidates verified at once, every timed phase exclusive (sandbox/overlap.py)."""
    if not sandbox:
        if overlap > 1:
            raise ValueError("overlapped verification needs the sandbox")
        return InProcessExecutor()
    if overlap > 1:
        from kernelproof_core.sandbox.overlap import OverlappedExecutors

        return OverlappedExecutors(overlap)
    from kernelproof_core.sandbox import SandboxExecutor

    return SandboxExecutor()
