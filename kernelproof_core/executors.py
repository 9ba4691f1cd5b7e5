"""Choosing where candidate code runs. Callers ask for a sandbox or not; they never construct executors directly."""

from __future__ import annotations

from kernelproof_core.verify import Executor, InProcessExecutor


def make_executor(sandbox: bool = True) -> Executor:
    """The sandboxed runner by default; the in-process executor only for trusted local debugging."""
    if not sandbox:
        return InProcessExecutor()
    from kernelproof_core.sandbox import SandboxExecutor

    return SandboxExecutor()
