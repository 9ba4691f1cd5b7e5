"""Resource limits and deadlines, as data.

`RLIMIT_TABLE` says which rlimit the child sets, to what, why, and when. Process count and address space are
only fallbacks: the per-candidate cgroup is exact and per candidate, while RLIMIT_NPROC counts every process
of the uid on the host and RLIMIT_AS breaks CUDA (it reserves far more virtual address space than it uses; a
16 GiB RLIMIT_AS breaks torch on the H200), so RLIMIT_AS is applied only to interpreter runs without a memory
cgroup.
"""

from __future__ import annotations

import contextlib
import logging
import resource
from collections.abc import Callable
from dataclasses import dataclass

from kernelproof_core.campaign import Campaign
from kernelproof_core.sandbox.protocol import ChildLimits
from kernelproof_core.settings import Settings

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ResourceLimits:
    memory_bytes: int
    max_processes: int
    cpu_time_s: int
    max_file_bytes: int
    max_open_files: int
    output_cap_bytes: int
    scratch_bytes: int
    max_message_bytes: int

    @classmethod
    def from_settings(cls, s: Settings) -> ResourceLimits:
        return cls(
            memory_bytes=s.sandbox_memory_limit_bytes,
            max_processes=s.sandbox_max_processes,
            cpu_time_s=s.sandbox_cpu_time_limit_s,
            max_file_bytes=s.sandbox_max_file_bytes,
            max_open_files=s.sandbox_max_open_files,
            output_cap_bytes=s.sandbox_output_cap_bytes,
            scratch_bytes=s.sandbox_scratch_bytes,
            max_message_bytes=s.sandbox_max_message_bytes,
        )

    def for_child(self, memory_cgroup: bool, pids_cgroup: bool, device: str) -> ChildLimits:
        return ChildLimits(
            cpu_time_s=self.cpu_time_s,
            max_file_bytes=self.max_file_bytes,
            max_open_files=self.max_open_files,
            max_processes=self.max_processes,
            memory_bytes=self.memory_bytes,
            nproc_rlimit=not pids_cgroup,
            address_space_rlimit=not memory_cgroup and device == "interpreter",
        )


@dataclass(frozen=True)
class RlimitRule:
    name: str
    resource: int
    value: Callable[[ChildLimits], int]
    applies: Callable[[ChildLimits], bool]
    reason: str


def _always(_: ChildLimits) -> bool:
    return True


RLIMIT_TABLE: tuple[RlimitRule, ...] = (
    RlimitRule("core", resource.RLIMIT_CORE, lambda lim: 0, _always,
               "no core dumps: they copy memory to disk and take seconds"),
    RlimitRule("cpu", resource.RLIMIT_CPU, lambda lim: lim.cpu_time_s, _always,
               "CPU-seconds backstop behind the wall-clock watchdog (SIGXCPU)"),
    RlimitRule("fsize", resource.RLIMIT_FSIZE, lambda lim: lim.max_file_bytes, _always,
               "largest file the candidate may write (SIGXFSZ)"),
    RlimitRule("nofile", resource.RLIMIT_NOFILE, lambda lim: lim.max_open_files, _always,
               "open file descriptors"),
    RlimitRule("nproc", resource.RLIMIT_NPROC, lambda lim: lim.max_processes, lambda lim: lim.nproc_rlimit,
               "process count, only when no pids cgroup holds the candidate"),
    RlimitRule("as", resource.RLIMIT_AS, lambda lim: lim.memory_bytes, lambda lim: lim.address_space_rlimit,
               "host memory, only for interpreter runs without a memory cgroup"),
)


def apply_rlimits(limits: ChildLimits) -> list[str]:
    """Lower the child's rlimits per RLIMIT_TABLE (never raising one above the inherited hard limit)."""
    applied = []
    for rule in RLIMIT_TABLE:
        if not rule.applies(limits):
            continue
        value = rule.value(limits)
        _soft, hard = resource.getrlimit(rule.resource)
        if hard != resource.RLIM_INFINITY:
            value = min(value, hard)
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(rule.resource, (value, value))
            applied.append(rule.name)
            continue
        log.warning("could not set RLIMIT %s", rule.name)
    return applied


@dataclass(frozen=True)
class Deadlines:
    """Wall-clock budgets enforced by the supervisor.

    compile_s bounds each compile span separately: loading the module, and each case's first (JIT) call.
    execution_s is one budget for everything after compilation, summed over the candidate's cases.
    start_s bounds our own child start-up (before any candidate code): exceeding it is an infra error.
    """

    compile_s: float
    execution_s: float
    start_s: float
    kill_grace_s: float


def deadlines_for(campaign: Campaign, task: str, s: Settings) -> Deadlines:
    """Campaign deadlines, overridden per task by settings.sandbox_task_*_timeout_s."""
    return Deadlines(
        compile_s=s.sandbox_task_compile_timeout_s.get(task, campaign.compile_timeout_s),
        execution_s=s.sandbox_task_execution_timeout_s.get(task, campaign.execution_timeout_s),
        start_s=s.sandbox_child_start_timeout_s,
        kill_grace_s=s.sandbox_kill_grace_s,
    )
