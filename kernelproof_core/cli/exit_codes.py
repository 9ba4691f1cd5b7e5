"""Process exit codes of the CLI (documented in README and docs/API.md)."""

from __future__ import annotations

import enum

from kernelproof_core.verdicts import Verdict


class ExitCode(enum.IntEnum):
    OK = 0  # every requested case passed
    FAILED = 2  # at least one case failed verification (a candidate fault)
    DEVICE_UNAVAILABLE = 3  # CUDA or the requested device is unavailable
    INFRA = 4  # an infrastructure fault: nothing can be said about the candidate
    USAGE = 64  # bad command line (BSD EX_USAGE)
    BROKEN_PIPE = 141  # stdout's reader went away (`| head`): 128 + SIGPIPE, as a shell tool would end


def exit_code_for(verdict: Verdict) -> ExitCode:
    if verdict is Verdict.PASS:
        return ExitCode.OK
    if verdict in (Verdict.INFRA_ERROR, Verdict.SKIPPED):
        return ExitCode.INFRA
    return ExitCode.FAILED
