"""`SandboxExecutor`: the Executor every caller (CLI, Celery worker, embedded service) uses by default.

It owns one warm fork server per device (started lazily, restarted when it dies), or in cold mode a fresh
sandbox per candidate; asks once, through a trusted child, for the environment the reports record; and runs each
candidate under `supervise()`. Whatever happens, the result is an `Execution` with a result for every planned
case and an `Isolation` block naming exactly the layers applied to that candidate. Failures of the sandbox
itself are infra_error, never the candidate's.
"""

from __future__ import annotations

import atexit
import importlib.metadata
import logging
import platform
import shutil
import socket
import threading
import time
import uuid
from typing import Any, Literal

from kernelproof_core import HARNESS_VERSION
from kernelproof_core.campaign import Campaign, CandidateJob, Device
from kernelproof_core.candidate import source_sha256
from kernelproof_core.errors import InfraError
from kernelproof_core.pipeline import CandidateOutcome, PipelineEvents
from kernelproof_core.report.models import CandidateInfo, CaseResult, Environment
from kernelproof_core.sandbox.arbiter import GpuArbiter
from kernelproof_core.sandbox.cgroups import remove_subtrees
from kernelproof_core.sandbox.channels import fork_child
from kernelproof_core.sandbox.deaths import classify
from kernelproof_core.sandbox.isolation import build_isolation, refusal, required_child_layers
from kernelproof_core.sandbox.launch import LaunchPlan, make_plan, start_server
from kernelproof_core.sandbox.limits import ResourceLimits, deadlines_for
from kernelproof_core.sandbox.protocol import ChildRequest, GpuTarget
from kernelproof_core.sandbox.results import PlannedCase, complete, plan, skeleton
from kernelproof_core.sandbox.server import SandboxStartError, ServerProcess
from kernelproof_core.sandbox.standby import StandbyPool
from kernelproof_core.sandbox.supervisor import Budget, RunOutcome, supervise
from kernelproof_core.settings import Settings, get_settings
from kernelproof_core.verdicts import Verdict
from kernelproof_core.verify import Execution, OneAtATime

log = logging.getLogger(__name__)

# Settings the pipeline reads inside the child. Only these enter the sandbox: others may hold credentials.
CHILD_SETTINGS = (
    "candidate_max_source_bytes",
    "default_warmups",
    "default_samples",
    "default_invocations_per_sample",
    "l2_flush_bytes",
    "input_ring_min_bytes",
    "input_ring_max_sets",
    "input_ring_max_bytes",
    "interpreter_samples",
    "profiler_invocations",
    "max_sample_ms",
    "launch_inclusive_samples",
    "launch_gate_host_release",
    "timing_cuda_graphs",
    "timing_ring_audits",
    "timing_kept_outputs_max_bytes",
    "nvml_sample_clocks",
    "throttle_clock_fraction",
    "integrity_audit_samples",
    "integrity_min_call_fraction",
    "integrity_dependent_launch_probe",
    "integrity_dependent_launch_delay_ms",
)


class SandboxExecutor(OneAtATime):
    """Runs every candidate in a disposable, isolated child process under a supervising watchdog.

    Thread-safe (one candidate at a time per executor); a worker with N concurrent slots uses N executors.
    `last_timings` holds the latest run's latency to candidate code and total time (benchmarks read it).
    """

    def __init__(self, settings: Settings | None = None, *, mode: str | None = None,
                 arbiter: GpuArbiter | None = None) -> None:
        self.settings = settings or get_settings()
        self.mode = mode or self.settings.sandbox_mode
        if self.mode not in ("forkserver", "cold"):
            raise ValueError(f"unknown sandbox mode {self.mode!r}")
        self.limits = ResourceLimits.from_settings(self.settings)
        self._plans: dict[Device, LaunchPlan] = {}
        self._servers: dict[Device, ServerProcess] = {}
        self._environments: dict[Device, Environment] = {}
        self._standbys: dict[Device, StandbyPool] = {}
        self._lock = threading.Lock()
        self.arbiter = arbiter  # shared with executors running beside this one on the same GPU (overlap.py)
        self.last_timings: dict[str, float] = {}
        self.last_standby = False  # whether the latest run's child was a standby (benchmarks and tests read it)
        atexit.register(self.close)

    def execute(self, job: CandidateJob, campaign: Campaign, events: PipelineEvents | None = None,
                precompiled: dict[str, bytes] | None = None) -> Execution:
        """Verify `job`. `precompiled`: its kernels' cache entries from a precompile child (precompiler.py), written
        into the child's own Triton cache just before the candidate loads."""
        asked = time.monotonic()
        planned = plan(job, campaign)  # an unknown task raises UsageError, as in-process
        self.last_standby = False
        info = CandidateInfo(task=planned[0].task.name if planned else job.task, origin=job.origin,
                             path=None if job.origin == "submission" else job.filename,
                             source_sha256=source_sha256(job.source), size_bytes=len(job.source))
        with self._lock:
            launch = self.plan_for(campaign.device)
            refused = refusal(job, launch, self.settings)
            if refused is not None:
                return self._infra(planned, info, launch, refused)
            try:
                environment = self.environment(campaign.device)
                server = self._server(launch)
                run, budget = self._run_verify(server, launch, job, campaign, planned, events,
                                               self._standby_pool(launch), precompiled or {})
            except InfraError as exc:
                log.error("sandbox failure: %s", exc)
                self._drop(campaign.device)
                return self._infra(planned, info, launch, str(exc))
            if self.mode == "cold" or run.server_lost or not server.alive():
                self._drop(campaign.device)
        cases = self._cases(planned, run, budget)
        if events is not None:  # reported cases were forwarded live; these are the ones the child never reported
            for result in cases[len(run.cases):]:
                events.case_done(result)
        self.last_timings = {"total_s": time.monotonic() - asked}
        if "load" in run.timestamps:
            self.last_timings["to_candidate_code_s"] = run.timestamps["load"] - asked
        # Start-up breakdown: seconds from the ask to each milestone the child reached (benchmarks read it).
        for name in ("hello", "armed", "prepare", "arm", "load", "done"):
            if name in run.timestamps:
                self.last_timings[f"at_{name}_s"] = run.timestamps[name] - asked
        isolation = build_isolation(launch, server, run)
        return Execution(CandidateOutcome(candidate=info, cases=cases), environment, isolation)

    def close(self) -> None:
        """Stop every server; idempotent (also registered with atexit)."""
        with self._lock:
            for device in list(self._servers):
                self._drop(device)
            for launch in self._plans.values():
                if launch.host_scratch is not None:
                    shutil.rmtree(launch.host_scratch, ignore_errors=True)
            self._plans.clear()
        remove_subtrees()

    def start(self, device: Device) -> None:
        """Start `device`'s fork server now rather than with the first job."""
        with self._lock:
            self._server(self.plan_for(device))

    def refusal_reason(self, job: CandidateJob, device: Device) -> str | None:
        """Why this executor would refuse `job` here (None: it will run it); for the service's intake checks."""
        with self._lock:
            return refusal(job, self.plan_for(device), self.settings)

    def plan_for(self, device: Device) -> LaunchPlan:
        if device not in self._plans:
            self._plans[device] = make_plan(device, self.settings, self.mode)
        return self._plans[device]

    def _server(self, launch: LaunchPlan) -> ServerProcess:
        server = self._servers.get(launch.device)
        if server is not None and server.alive():
            return server
        if server is not None:  # died: its standbys went with it
            self._drop(launch.device)
        server = start_server(launch, self.settings)
        if self.mode == "forkserver":
            self._servers[launch.device] = server
        return server

    def _standby_pool(self, launch: LaunchPlan) -> StandbyPool | None:
        """The device's standby children (None where they are off: cold mode, no landlock, or the setting)."""
        size = self.settings.sandbox_standby_children
        if self.mode != "forkserver" or size <= 0 or launch.host.landlock_abi <= 0:
            return None
        return self._standbys.setdefault(launch.device, StandbyPool(size))

    def _drop(self, device: Device) -> None:
        server = self._servers.pop(device, None)
        pool = self._standbys.pop(device, None)
        if pool is not None:
            pool.clear(server)
        if server is not None:
            server.stop(self.settings.sandbox_kill_grace_s)

    def probe_environment(self, device: Device) -> Environment:
        """environment(), under this executor's lock (for callers outside execute)."""
        with self._lock:
            return self.environment(device)

    def environment(self, device: Device) -> Environment:
        """What reports record as the environment, collected once by a trusted child (no candidate code)."""
        if device not in self._environments:
            launch = self.plan_for(device)
            server = self._server(launch)
            request = ChildRequest(kind="environment", device=device, measure_bandwidth=True,
                                   limits=self.limits.for_child(False, False, device))
            run = supervise(server, request, self._budget(None, launch), [], uuid.uuid4().hex)
            if self.mode == "cold" or run.server_lost:
                server.stop(self.settings.sandbox_kill_grace_s)
                self._servers.pop(device, None)
            if run.environment is None:
                why = classify(run.death, {}) if run.death else None
                raise SandboxStartError(f"environment probe failed: {why}; stderr: "
                                        f"{run.stderr_tail.decode(errors='replace')[-1000:]}")
            # The sandbox has its own UTS namespace; the report names the real host.
            self._environments[device] = run.environment.model_copy(update={"hostname": socket.gethostname()})
        return self._environments[device]

    def _budget(self, campaign: Campaign | None, launch: LaunchPlan, task: str = "") -> Budget:
        s = self.settings
        if campaign is None:
            compile_s = execution_s = s.sandbox_child_start_timeout_s
        else:
            d = deadlines_for(campaign, task, s)
            compile_s, execution_s = d.compile_s, d.execution_s
        cg = launch.host.cgroups
        return Budget(compile_s=compile_s, execution_s=execution_s, start_s=s.sandbox_child_start_timeout_s,
                      kill_grace_s=s.sandbox_kill_grace_s, output_cap_bytes=s.sandbox_output_cap_bytes,
                      max_message_bytes=s.sandbox_max_message_bytes,
                      memory_bytes=s.sandbox_memory_limit_bytes if cg.memory else None,
                      max_processes=s.sandbox_max_processes if cg.pids else None, cgroup_version=cg.version)

    def precompile(self, job: CandidateJob, campaign: Campaign, target: GpuTarget) -> RunOutcome | str:
        """Build `job`'s kernels for `target` in a fresh child forked without GPU start-up (precompiler.py). The
        run's outcome, or why there was none. Never a verdict: whatever happens, the verification compiles itself."""
        with self._lock:
            launch = self.plan_for(campaign.device)
            if launch.host.landlock_abi <= 0:  # only landlock keeps a child of a CUDA server off the GPU's nodes
                return "no landlock on this host: a precompile child could reach the GPU"
            refused = refusal(job, launch, self.settings)
            if refused is not None:
                return refused
            request = self._request("precompile", job, campaign, launch, target=target,
                                    precompile_max_bytes=self.settings.sandbox_precompile_max_bytes)
            request.required_layers = sorted({*request.required_layers, "landlock-fs"})
            try:
                server = self._server(launch)
                run_id = uuid.uuid4().hex
                run = supervise(server, request, self._budget(campaign, launch, job.task), [], run_id,
                                channels=fork_child(server, run_id, gpu=False))
            except InfraError as exc:
                self._drop(campaign.device)
                return f"sandbox failure: {exc}"
            if self.mode == "cold" or run.server_lost or not server.alive():
                self._drop(campaign.device)
            return run

    def _request(self, kind: Literal["verify", "precompile"], job: CandidateJob, campaign: Campaign,
                 launch: LaunchPlan, **extra: Any) -> ChildRequest:
        cg = launch.host.cgroups
        settings_env = {f"KERNELPROOF_{k.upper()}": str(getattr(self.settings, k)) for k in CHILD_SETTINGS
                        if hasattr(self.settings, k)}
        return ChildRequest(kind=kind, device=campaign.device, job=job, campaign=campaign,
                            limits=self.limits.for_child(cg.memory, cg.pids, campaign.device),
                            settings_env=settings_env, required_layers=required_child_layers(job, self.settings),
                            **extra)

    def _run_verify(self, server: ServerProcess, launch: LaunchPlan, job: CandidateJob, campaign: Campaign,
                    planned: list[PlannedCase], events: PipelineEvents | None,
                    pool: StandbyPool | None, precompiled: dict[str, bytes]) -> tuple[RunOutcome, Budget]:
        request = self._request("verify", job, campaign, launch, rendezvous=self.arbiter is not None,
                                precompiled=precompiled)
        budget = self._budget(campaign, launch, job.task)
        arbiter = self.arbiter
        if pool is None:
            run = supervise(server, request, budget, [p.case.case_id for p in planned], uuid.uuid4().hex, events,
                            arbiter=arbiter)
            return run, budget
        if arbiter is not None:  # exclusive phases of any run sharing the GPU freeze this executor's standbys
            arbiter.set_pauser(f"executor-{id(self)}", lambda on: pool.pause(server, on))
        channels = pool.take(server)  # a standby started up ahead of this job, or None: a fresh fork
        self.last_standby = channels is not None
        pool.fill(server)  # the next jobs' standbys start up while this one runs (paused while it is timed)
        try:
            run = supervise(server, request, budget, [p.case.case_id for p in planned],
                            channels.run_id if channels else uuid.uuid4().hex, events, channels=channels,
                            measuring=None if arbiter else lambda on: pool.pause(server, on), arbiter=arbiter)
        finally:
            if arbiter is None:
                pool.pause(server, False)
        return run, budget

    @staticmethod
    def _cases(planned: list[PlannedCase], run: RunOutcome, budget: Budget) -> list[CaseResult]:
        assert run.death is not None
        params = {"compile_s": budget.compile_s, "execution_s": budget.execution_s, "start_s": budget.start_s,
                  "output_cap_bytes": budget.output_cap_bytes}
        verdict_msg = classify(run.death, params)
        verdict, message = verdict_msg if verdict_msg else (None, "")
        detail = None
        if verdict is not None and run.stderr_tail:
            detail = "stderr tail: " + run.stderr_tail.decode(errors="replace")[-1500:]
        return complete(planned, run.cases, verdict, message, detail, died_loading=run.last_phase == "load",
                        last_case=run.last_case)

    def _infra(self, planned: list[PlannedCase], info: CandidateInfo, launch: LaunchPlan,
               message: str) -> Execution:
        cases = [skeleton(p, Verdict.INFRA_ERROR, message[:2000]) for p in planned]
        env = self._environments.get(launch.device) or fallback_environment(launch.device)
        return Execution(CandidateOutcome(candidate=info, cases=cases), env, build_isolation(launch, None, None))


def fallback_environment(device: Device) -> Environment:
    """Environment without touching torch or CUDA here (when the sandbox could not report one)."""

    def version(dist: str) -> str:
        try:
            return importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            return "unavailable"

    return Environment(device=device, hostname=socket.gethostname(), platform=platform.platform(),
                       python=platform.python_version(), torch=version("torch"), triton=version("triton"),
                       harness_version=HARNESS_VERSION)
