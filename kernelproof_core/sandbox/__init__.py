"""Disposable sandboxed candidate runner with compile and execution watchdogs (docs/SECURITY.md).

Candidate code never runs in the verifier's, API's or worker's own process: each candidate runs in a fresh
child forked from a warm server inside bubblewrap (or, in cold mode, a fresh sandbox), armed with rlimits,
landlock and seccomp, in its own cgroup, under a supervisor that owns every deadline and every kill.
"""

from kernelproof_core.sandbox.executor import SandboxExecutor

__all__ = ["SandboxExecutor"]
