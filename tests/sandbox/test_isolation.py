"""The isolation block of every report, cold mode, the refusal policy, recovery from a dead server, per-task
deadlines and event forwarding."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from kernelproof_core.campaign import CandidateJob
from kernelproof_core.errors import UsageError
from kernelproof_core.report.models import CaseResult
from kernelproof_core.sandbox import SandboxExecutor
from kernelproof_core.sandbox.layers import LANDLOCK_NET_ABI, LANDLOCK_SCOPE_ABI, probe_host
from kernelproof_core.verdicts import Verdict
from kernelproof_core.verify import run_verification
from tests.sandbox.candidates import source
from tests.sandbox.conftest import CASES, assert_honest_passes, campaign, run, sandbox_settings, verdicts


def expected_layers() -> set[str]:
    """What this host can give, per the probe: the report must list all of it."""
    host = probe_host(None)
    layers = {"process", "forkserver", "clean-environment", "scratch-dir", "own-triton-cache", "rlimits",
              "no-new-privs", "watchdog", "output-cap", "result-channel"}
    if host.bwrap_path:
        layers |= {"bwrap", "mount-namespace", "pid-namespace", "network-namespace", "ipc-namespace"}
    if host.is_root:
        layers.add("separate-user")
    if host.seccomp:
        layers.add("seccomp")
    if host.landlock_abi:
        layers.add("landlock-fs")
    if host.landlock_abi >= LANDLOCK_NET_ABI:
        layers.add("landlock-net")
    if host.landlock_abi >= LANDLOCK_SCOPE_ABI:
        layers.add("landlock-scope")
    if host.cgroups.memory:
        layers.add("cgroup-memory")
    if host.cgroups.pids:
        layers.add("cgroup-pids")
    return layers


def test_report_isolation_block_lists_the_active_layers(executor: SandboxExecutor) -> None:
    job = CandidateJob(task="rms_norm", source=source("honest"), origin="submission")
    report = run_verification([job], campaign(), executor)
    assert report.summary.verdict is Verdict.PASS
    iso = report.isolation
    assert iso.sandboxed
    assert expected_layers() <= set(iso.layers), set(iso.layers) ^ expected_layers()
    assert not set(iso.layers) & set(iso.missing_layers)
    assert iso.note and "warm fork server" in iso.note
    assert report.environment.hostname == socket.gethostname()


def test_cold_mode_runs_each_candidate_in_a_fresh_sandbox() -> None:
    ex = SandboxExecutor(sandbox_settings(), mode="cold")
    try:
        first = run(ex, "honest")
        assert verdicts(first) == [Verdict.PASS] * len(CASES)
        assert "cold-start" in first.isolation.layers and "forkserver" not in first.isolation.layers
        assert verdicts(run(ex, "segfault"))[0] is Verdict.CRASHED
        assert_honest_passes(ex)
    finally:
        ex.close()


def test_untrusted_submissions_are_refused_without_isolation_unless_the_operator_opts_out() -> None:
    no_bwrap = {"sandbox_bwrap_path": Path("/nonexistent/bwrap")}
    ex = SandboxExecutor(sandbox_settings(**no_bwrap))
    try:
        submission = CandidateJob(task="rms_norm", source=source("honest"), origin="submission")
        assert ex.refusal_reason(submission, "interpreter") is not None  # what the API asks on intake
        refused = run(ex, "honest", origin="submission")
        assert verdicts(refused) == [Verdict.INFRA_ERROR] * len(CASES)
        assert refused.outcome.cases[0].failure is not None
        assert "refusing an untrusted submission" in refused.outcome.cases[0].failure.message
        local = run(ex, "honest", origin="file")  # a local file: runs degraded, and says so
        assert verdicts(local) == [Verdict.PASS] * len(CASES)
        assert {"mount-namespace", "network-namespace"} <= set(local.isolation.missing_layers)
        assert local.isolation.note and "DEGRADED" in local.isolation.note
    finally:
        ex.close()
    opted_out = SandboxExecutor(sandbox_settings(**no_bwrap, allow_unsandboxed=True))
    try:
        assert verdicts(run(opted_out, "honest", origin="submission")) == [Verdict.PASS] * len(CASES)
    finally:
        opted_out.close()


def test_a_dead_fork_server_is_replaced(executor: SandboxExecutor) -> None:
    server = executor._servers["interpreter"]
    server.kill()
    assert_honest_passes(executor)
    assert executor._servers["interpreter"] is not server


def test_per_task_deadline_overrides_the_campaign() -> None:
    ex = SandboxExecutor(sandbox_settings(sandbox_task_compile_timeout_s={"rms_norm": 2.0}))
    try:
        execution = run(ex, "import_loop", campaign(compile_timeout_s=300))
        assert verdicts(execution) == [Verdict.COMPILE_TIMEOUT] * len(CASES)
        assert execution.outcome.cases[0].failure is not None
        assert "2 s" in execution.outcome.cases[0].failure.message
    finally:
        ex.close()


def test_events_are_forwarded_and_unknown_tasks_raise(executor: SandboxExecutor) -> None:
    phases: list[tuple[str, str | None]] = []
    done: list[CaseResult] = []

    class Events:
        def phase(self, name: str, case_id: str | None = None) -> None:
            phases.append((name, case_id))

        def case_done(self, result: CaseResult) -> None:
            done.append(result)

    job = CandidateJob(task="rms_norm", source=source("honest"))
    executor.execute(job, campaign(), Events())
    assert phases[0] == ("load", None)
    assert ("compile", CASES[0]) in phases and ("execute", CASES[1]) in phases
    assert [r.case_id for r in done] == CASES
    with pytest.raises(UsageError):
        executor.execute(CandidateJob(task="no_such_task", source=b"x = 1"), campaign())
