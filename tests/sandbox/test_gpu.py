"""GPU-only sandbox behaviour (run on the H200 by scripts/gpu-check): a kernel that spins forever on the GPU ends as
execution_timeout and leaves the GPU usable; an illegal memory access affects only its own process; the child sees
only its GPU; the warm path meets its latency target; the fork server's prebuilt harness kernels are cache hits in a
child; with compile-ahead a verification child compiles nothing."""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kernelproof_core.campaign import Campaign
from kernelproof_core.sandbox import SandboxExecutor
from kernelproof_core.sandbox.forkserver import prewarm_triton
from kernelproof_core.sandbox.protocol import CHILD_DROPPED_ENV, ServerConfig
from kernelproof_core.sandbox.triton_cache import install_entries
from kernelproof_core.tasks import CaseSet
from kernelproof_core.verdicts import Verdict
from tests.sandbox.conftest import run, sandbox_settings, verdicts

pytestmark = pytest.mark.gpu
GPU_CASES = ["n1", "tail127"]


def gpu_campaign(**overrides: Any) -> Campaign:
    values: dict[str, Any] = dict(device="cuda", dtypes=["float32"], case_set=CaseSet.FULL, case_ids=GPU_CASES,
                                     measure=False, compile_timeout_s=120.0, execution_timeout_s=15.0)
    values.update(overrides)
    return Campaign(**values)


@pytest.fixture(scope="module")
def gpu_executor() -> Iterator[SandboxExecutor]:
    ex = SandboxExecutor(sandbox_settings(sandbox_memory_limit_bytes=16 * 1024**3, sandbox_max_processes=1024,
                                          sandbox_kill_grace_s=10.0))
    yield ex
    ex.close()


def honest_passes(ex: SandboxExecutor) -> None:
    execution = run(ex, "honest", gpu_campaign())
    assert verdicts(execution) == [Verdict.PASS] * len(GPU_CASES), execution.outcome.cases


def test_gpu_child_sees_only_its_gpu(gpu_executor: SandboxExecutor) -> None:
    execution = run(gpu_executor, "gpu_devices", gpu_campaign())
    assert verdicts(execution) == [Verdict.PASS] * len(GPU_CASES), execution.outcome.cases
    assert "gpu-device-node" in execution.isolation.layers
    assert execution.environment.gpu is not None


def test_kernel_spinning_forever_is_an_execution_timeout_and_the_gpu_stays_usable(
        gpu_executor: SandboxExecutor) -> None:
    execution = run(gpu_executor, "gpu_spin", gpu_campaign())
    assert verdicts(execution) == [Verdict.EXECUTION_TIMEOUT, Verdict.SKIPPED], execution.outcome.cases
    honest_passes(gpu_executor)


def test_illegal_memory_access_affects_only_its_own_process(gpu_executor: SandboxExecutor) -> None:
    execution = run(gpu_executor, "gpu_illegal_address", gpu_campaign())
    first = execution.outcome.cases[0]
    assert first.verdict in (Verdict.CRASHED, Verdict.RUNTIME_ERROR), first
    # The lost context is the candidate's doing: no later case of its run is blamed on the infrastructure.
    assert Verdict.INFRA_ERROR not in verdicts(execution), execution.outcome.cases
    honest_passes(gpu_executor)


def test_warm_start_reaches_candidate_code_within_a_second(gpu_executor: SandboxExecutor) -> None:
    honest_passes(gpu_executor)  # server and environment warm
    latencies, totals = [], []
    for _ in range(5):
        execution = run(gpu_executor, "honest", gpu_campaign(case_ids=["llama_4096"], dtypes=["bfloat16"],
                                                             measure=True, warmups=2, samples=10,
                                                             invocations_per_sample=10))
        assert verdicts(execution) == [Verdict.PASS]
        latencies.append(gpu_executor.last_timings["to_candidate_code_s"])
        totals.append(gpu_executor.last_timings["total_s"])
    assert statistics.median(latencies) < 1.0, latencies
    assert statistics.median(totals) < 5.0, totals


def test_overlapped_runs_on_the_gpu_pass_with_every_timed_phase_alone() -> None:
    """Overlap on CUDA: children drain their device before each boundary; timed phases and arming never overlap
    another run's GPU work (sandbox/arbiter.py)."""
    from kernelproof_core.campaign import CandidateJob
    from kernelproof_core.sandbox.arbiter import exclusive_windows
    from kernelproof_core.sandbox.overlap import OverlappedExecutors
    from tests.sandbox.candidates import source

    runner = OverlappedExecutors(2, sandbox_settings(sandbox_memory_limit_bytes=16 * 1024**3,
                                                     sandbox_max_processes=1024, sandbox_kill_grace_s=10.0))
    try:
        jobs = [CandidateJob(task="rms_norm", source=source("honest"), origin="submission") for _ in range(4)]
        camp = gpu_campaign(case_ids=["llama_4096"], dtypes=["bfloat16"], measure=True, warmups=2, samples=10,
                            invocations_per_sample=10)
        for execution in runner.execute_many(jobs, camp):
            assert verdicts(execution) == [Verdict.PASS], execution.outcome.cases
        log = list(runner.arbiter.log)
    finally:
        runner.close()
    windows = exclusive_windows(log)
    assert len(windows) >= 2 * len(jobs)  # arming and the timed case of every job
    for run_id, start, end in windows:
        assert not [r for t, r, e in log if e == "released" and r != run_id and start < t < end]


def test_fork_server_prebuilds_the_harness_kernels_for_its_children(tmp_path: Path) -> None:
    """The seed holds the warm-up and wait kernels, under the cache keys a child computes: a process with a child's
    environment, starting from the seed installed as a child installs it, compiles nothing (no file of its cache is
    written again: a miss would rewrite the entry under the same names)."""
    seed = prewarm_triton(ServerConfig(device="cuda", scratch_root=str(tmp_path / "scratch")))
    names = {Path(rel).name for rel in seed}
    assert {"_warm.cubin", "_wait_for_host.cubin"} <= names, sorted(names)
    cache = tmp_path / "child-cache"
    install_entries(cache, seed)
    before = {p: p.stat().st_mtime_ns for p in cache.rglob("*") if p.is_file()}
    env = {k: v for k, v in os.environ.items() if not k.startswith(CHILD_DROPPED_ENV)}
    env |= {"TRITON_CACHE_DIR": str(cache), "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    code = ("from kernelproof_core.measurement.launch_gate import host_release_error; "
            "from kernelproof_core.integrity.run import warm_up_process; warm_up_process('cuda'); "
            "assert host_release_error() is None, host_release_error()")
    subprocess.run([sys.executable, "-c", code], env=env, check=True, timeout=300)
    after = {p: p.stat().st_mtime_ns for p in cache.rglob("*") if p.is_file()}
    assert after == before, sorted(str(p) for p in after if after[p] != before.get(p))


def test_compile_ahead_leaves_the_verification_nothing_to_compile() -> None:
    """Overlap with compile-ahead: each job's precompile child builds its kernels without a GPU, and its verification
    child (which fails `precompile_hits` on any compile after load) passes. The same candidate verified without
    compile-ahead fails, so the check can fail."""
    from kernelproof_core.campaign import CandidateJob
    from kernelproof_core.sandbox.overlap import OverlappedExecutors
    from tests.sandbox.candidates import source

    settings = sandbox_settings(sandbox_memory_limit_bytes=16 * 1024**3, sandbox_max_processes=1024,
                                sandbox_kill_grace_s=10.0)
    camp = gpu_campaign(dtypes=["bfloat16"])
    jobs = [CandidateJob(task="rms_norm", source=source("precompile_hits") + f"\n# job {i}\n".encode(),
                         origin="submission") for i in range(3)]
    runner = OverlappedExecutors(2, settings, precompile=True)
    try:
        executions = runner.execute_many(jobs, camp)
        ahead = list(runner.precompiled)
    finally:
        runner.close()
    for execution in executions:
        assert verdicts(execution) == [Verdict.PASS] * len(GPU_CASES), execution.outcome.cases
        assert "precompiled: " in (execution.isolation.note or ""), execution.isolation.note
    assert len(ahead) == len(jobs)
    for _, done in ahead:
        assert done.failed == [] and done.note == "" and done.launcher_errors == [], done
        assert done.files == {}  # the log keeps no bytes
        assert any(n.endswith(".cubin") for n in done.file_names) and any(".so" in n for n in done.file_names), done
    plain = SandboxExecutor(settings)
    try:
        execution = plain.execute(jobs[0], camp)
    finally:
        plain.close()
    assert verdicts(execution)[0] is Verdict.RUNTIME_ERROR, execution.outcome.cases
    assert "compiled after load" in (execution.outcome.cases[0].failure.message or ""), execution.outcome.cases[0]
