"""How a candidate process ended, and which verdict that is. All mappings are tables.

Blame rule: anything that happens before the candidate's code started (the child's "load" phase) is ours
(infra_error); from then on, the process is the candidate's, so an unexplained death, a malformed or oversized
message on the result channel, or an exit without the final "done" message is the candidate's doing (crashed).
A harness exception the child reports itself stays infra_error.
"""

from __future__ import annotations

import enum
import os
import signal
from collections.abc import Mapping
from dataclasses import dataclass

from kernelproof_core.verdicts import Verdict


class KillReason(enum.StrEnum):
    """Why the supervisor killed the child."""

    COMPILE_DEADLINE = "compile_deadline"
    EXECUTION_DEADLINE = "execution_deadline"
    START_DEADLINE = "start_deadline"  # our child never got to the candidate's code
    OUTPUT_CAP = "output_cap"
    PROTOCOL = "protocol"  # malformed/oversized result message
    SERVER_LOST = "server_lost"  # the fork server died while the candidate ran
    SHUTDOWN = "shutdown"


# reason -> (verdict if the candidate's code had started, message)
KILL_VERDICTS: dict[KillReason, tuple[Verdict, str]] = {
    KillReason.COMPILE_DEADLINE: (Verdict.COMPILE_TIMEOUT, "compile deadline of {compile_s:g} s exceeded {detail}"),
    KillReason.EXECUTION_DEADLINE: (Verdict.EXECUTION_TIMEOUT,
                                    "execution deadline of {execution_s:g} s (all runs together) exceeded {detail}"),
    KillReason.START_DEADLINE: (Verdict.INFRA_ERROR, "sandbox child did not start within {start_s:g} s"),
    KillReason.OUTPUT_CAP: (Verdict.RESOURCE_LIMIT, "stdout/stderr exceeded the {output_cap_bytes} byte cap"),
    KillReason.PROTOCOL: (Verdict.CRASHED, "result channel protocol violation: {detail}"),
    KillReason.SERVER_LOST: (Verdict.CRASHED, "the sandbox's fork server died while the candidate ran"),
    KillReason.SHUTDOWN: (Verdict.INFRA_ERROR, "the verifier shut down during the run"),
}

# Deaths by signal that mean a resource limit rather than a crash.
SIGNAL_VERDICTS: dict[int, tuple[Verdict, str]] = {
    signal.SIGXCPU: (Verdict.RESOURCE_LIMIT, "CPU time limit (RLIMIT_CPU) exceeded: SIGXCPU"),
    signal.SIGXFSZ: (Verdict.RESOURCE_LIMIT, "file size limit (RLIMIT_FSIZE) exceeded: SIGXFSZ"),
}

OOM_MESSAGE = "host memory limit exceeded (cgroup OOM kill)"
PIDS_MESSAGE = "process limit of {max_processes} reached (fork failed); the candidate saw: {original}"


def signal_name(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


@dataclass(frozen=True)
class Death:
    """Everything the supervisor knows about how the child ended."""

    wait_status: int | None  # raw waitpid status from the fork server; None if unknown
    started: bool  # the candidate's code had started (phase "load" seen)
    done: bool  # the child sent its final "done"
    kill_reason: KillReason | None = None
    kill_detail: str = ""
    oom_killed: bool = False
    harness_error: str | None = None
    abort: str | None = None

    def describe_status(self) -> str:
        if self.wait_status is None:
            return "unknown status"
        if os.WIFSIGNALED(self.wait_status):
            return f"killed by {signal_name(os.WTERMSIG(self.wait_status))}"
        if os.WIFEXITED(self.wait_status):
            return f"exited with status {os.WEXITSTATUS(self.wait_status)}"
        return f"wait status {self.wait_status}"


def classify(death: Death, params: Mapping[str, object]) -> tuple[Verdict, str] | None:
    """Verdict and message for an abnormal end; None when the child finished normally."""
    if death.kill_reason is not None:
        verdict, template = KILL_VERDICTS[death.kill_reason]
        message = template.format(detail=death.kill_detail, **params)
        if verdict is not Verdict.INFRA_ERROR and not death.started:
            return Verdict.INFRA_ERROR, f"before the candidate ran: {message}"
        return verdict, message
    if death.harness_error is not None:
        return Verdict.INFRA_ERROR, f"harness error in the sandbox child: {death.harness_error}"
    if death.done:  # every result is in; how the process went away afterwards changes nothing
        return None
    if not death.started:
        return Verdict.INFRA_ERROR, f"sandbox child died before the candidate ran ({death.describe_status()})"
    if death.oom_killed:
        return Verdict.RESOURCE_LIMIT, OOM_MESSAGE
    if death.wait_status is not None and os.WIFSIGNALED(death.wait_status):
        signum = os.WTERMSIG(death.wait_status)
        if signum in SIGNAL_VERDICTS:
            return SIGNAL_VERDICTS[signum]
        return Verdict.CRASHED, f"candidate process killed by {signal_name(signum)}"
    if death.abort is not None:
        return Verdict.CRASHED, f"candidate raised {death.abort}; the process {death.describe_status()}"
    return Verdict.CRASHED, f"candidate process {death.describe_status()} before finishing"
