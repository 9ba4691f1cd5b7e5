"""Typed failures. Each carries the verdict it maps to, so no caller has to translate exception types."""

from __future__ import annotations

from kernelproof_core.verdicts import Verdict


class KernelProofError(Exception):
    """Base of every error the harness raises on purpose."""


class CandidateFailure(KernelProofError):
    """The candidate did something that fails verification; `verdict` says what."""

    def __init__(self, verdict: Verdict, message: str, detail: str | None = None) -> None:
        super().__init__(message)
        self.verdict = verdict
        self.message = message
        self.detail = detail


class InfraError(KernelProofError):
    """A fault of the verifier or its host (never the candidate's)."""


class DeviceUnavailable(InfraError):
    """The requested device (CUDA) is not available on this host."""


class UsageError(KernelProofError):
    """The user asked for something that does not exist (unknown task, bad dtype, bad option)."""
