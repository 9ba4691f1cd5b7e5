"""The sandbox's data tables and building blocks, without starting a sandbox: death classification, result
completion, rlimit rules, the derived mount view, the seccomp filter and landlock (each in a throwaway process)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from kernelproof_core.campaign import CandidateJob
from kernelproof_core.sandbox.deaths import Death, KillReason, classify
from kernelproof_core.sandbox.layers import landlock_abi, seccomp_available
from kernelproof_core.sandbox.limits import RLIMIT_TABLE, deadlines_for
from kernelproof_core.sandbox.mounts import bwrap_argv, derive_view
from kernelproof_core.sandbox.protocol import ChildLimits, LineReader, ProtocolError
from kernelproof_core.sandbox.results import complete, plan, skeleton
from kernelproof_core.verdicts import Verdict
from tests.sandbox.conftest import campaign, sandbox_settings

PARAMS = {"compile_s": 5.0, "execution_s": 7.0, "start_s": 9.0, "output_cap_bytes": 100}
SEGV = signal.SIGSEGV  # raw wait status of a process killed by SIGSEGV is the signal number
EXIT3 = 3 << 8

# (death, expected verdict or None for a normal end, substring of the message)
DEATHS: list[tuple[Death, Verdict | None, str]] = [
    (Death(0, started=True, done=True), None, ""),
    (Death(SEGV, started=True, done=True), None, ""),  # after "done" nothing changes
    (Death(SEGV, started=True, done=False), Verdict.CRASHED, "SIGSEGV"),
    (Death(signal.SIGXFSZ, started=True, done=False), Verdict.RESOURCE_LIMIT, "RLIMIT_FSIZE"),
    (Death(signal.SIGXCPU, started=True, done=False), Verdict.RESOURCE_LIMIT, "RLIMIT_CPU"),
    (Death(signal.SIGKILL, started=True, done=False, oom_killed=True), Verdict.RESOURCE_LIMIT, "memory"),
    (Death(0, started=True, done=False), Verdict.CRASHED, "exited with status 0 before finishing"),
    (Death(EXIT3, started=True, done=False, abort="SystemExit"), Verdict.CRASHED, "SystemExit"),
    (Death(SEGV, started=False, done=False), Verdict.INFRA_ERROR, "before the candidate ran"),
    (Death(70 << 8, started=True, done=False, harness_error="boom"), Verdict.INFRA_ERROR, "boom"),
    (Death(9, True, False, KillReason.COMPILE_DEADLINE, "in the first call of case n1"), Verdict.COMPILE_TIMEOUT,
     "compile deadline of 5 s exceeded in the first call of case n1"),
    (Death(9, True, False, KillReason.EXECUTION_DEADLINE, "in case n1's later calls"), Verdict.EXECUTION_TIMEOUT,
     "7 s (all runs together) exceeded in case n1's later calls"),
    (Death(9, True, False, KillReason.OUTPUT_CAP), Verdict.RESOURCE_LIMIT, "100 byte"),
    (Death(9, True, False, KillReason.PROTOCOL, "junk"), Verdict.CRASHED, "junk"),
    (Death(9, False, False, KillReason.PROTOCOL, "junk"), Verdict.INFRA_ERROR, "before the candidate ran"),
    (Death(None, False, False, KillReason.START_DEADLINE), Verdict.INFRA_ERROR, "9 s"),
]


@pytest.mark.parametrize(("death", "verdict", "message"), DEATHS)
def test_deaths_map_to_verdicts(death: Death, verdict: Verdict | None, message: str) -> None:
    got = classify(death, PARAMS)
    if verdict is None:
        assert got is None
    else:
        assert got is not None and got[0] is verdict and message in got[1], got


def test_complete_lists_every_planned_case() -> None:
    planned = plan(CandidateJob(task="rms_norm", source=b"x"), campaign(case_ids=["n1", "tail127", "n1024"]))
    done = [skeleton(planned[0], Verdict.PASS, "")]
    mid = complete(planned, done, Verdict.CRASHED, "boom", None, died_loading=False)
    assert [c.verdict for c in mid] == [Verdict.PASS, Verdict.CRASHED, Verdict.SKIPPED]
    loading = complete(planned, [], Verdict.COMPILE_TIMEOUT, "slow", None, died_loading=True)
    assert [c.verdict for c in loading] == [Verdict.COMPILE_TIMEOUT] * 3
    infra = complete(planned, done, Verdict.INFRA_ERROR, "ours", None, died_loading=False)
    assert [c.verdict for c in infra] == [Verdict.PASS, Verdict.INFRA_ERROR, Verdict.INFRA_ERROR]
    assert infra[1].reward is None and mid[1].reward is not None and mid[1].reward.value == -1
    short = complete(planned, done, None, "", None, died_loading=False)  # "done" without every case
    assert [c.verdict for c in short][1] is Verdict.CRASHED


def test_a_death_ahead_of_deferred_measurements_is_the_last_phases_case() -> None:
    """Deferred measurement: n1 passed its gates, its timing waits; the child dies compiling n1024."""
    planned = plan(CandidateJob(task="rms_norm", source=b"x"), campaign(case_ids=["n1", "tail127", "n1024"]))
    got = complete(planned, [], Verdict.CRASHED, "boom", None, died_loading=False, last_case="n1024")
    assert [c.verdict for c in got] == [Verdict.SKIPPED, Verdict.SKIPPED, Verdict.CRASHED]
    assert got[0].failure is not None and "not measured" in got[0].failure.message
    assert got[0].reward is None and got[2].reward is not None and got[2].reward.value == -1
    # The last phase on the first unreported case: as without deferral.
    same = complete(planned, [], Verdict.CRASHED, "boom", None, died_loading=False, last_case="n1")
    assert [c.verdict for c in same] == [Verdict.CRASHED, Verdict.SKIPPED, Verdict.SKIPPED]
    infra = complete(planned, [], Verdict.INFRA_ERROR, "ours", None, died_loading=False, last_case="n1024")
    assert [c.verdict for c in infra] == [Verdict.INFRA_ERROR] * 3


def test_line_reader_refuses_oversized_messages() -> None:
    reader = LineReader(max_bytes=10)
    assert reader.feed(b"abc\nde") == [b"abc"]
    with pytest.raises(ProtocolError):
        reader.feed(b"x" * 20)


def test_rlimit_fallbacks_apply_only_without_cgroups() -> None:
    def applied(**flags: bool) -> set[str]:
        limits = ChildLimits(cpu_time_s=1, max_file_bytes=1, max_open_files=1, max_processes=1, memory_bytes=1,
                             **flags)
        return {rule.name for rule in RLIMIT_TABLE if rule.applies(limits)}

    base = {"core", "cpu", "fsize", "nofile"}
    assert applied(nproc_rlimit=False, address_space_rlimit=False) == base
    assert applied(nproc_rlimit=True, address_space_rlimit=True) == base | {"nproc", "as"}


def test_per_task_deadlines_override_the_campaign() -> None:
    s = sandbox_settings(sandbox_task_execution_timeout_s={"softmax": 3.0})
    assert deadlines_for(campaign(execution_timeout_s=10), "softmax", s).execution_s == 3.0
    assert deadlines_for(campaign(execution_timeout_s=10), "rms_norm", s).execution_s == 10.0


def test_mount_view_is_derived_and_exposes_no_repository_or_secrets() -> None:
    import kernelproof_core

    view = derive_view("interpreter", 0, [])
    harness = str(Path(kernelproof_core.__file__).resolve().parent)
    assert harness in view.ro_binds
    assert str(Path(harness).parent) not in view.ro_binds  # the repository (and any .env in it) stays outside
    assert "/" not in view.ro_binds and not any(p.startswith("/home") for p in view.ro_binds)
    assert str(Path(sys.prefix).resolve()) in view.ro_binds
    assert not any("SECRET" in k or "s3cr3t" in v for k, v in view.env.items())
    argv = bwrap_argv("bwrap", view, as_root=True, uid=65534, gid=65534, scratch_bytes=1 << 20)
    for flag in ("--unshare-net", "--unshare-pid", "--clearenv", "--die-with-parent", "--new-session",
                 "--remount-ro"):
        assert flag in argv
    assert view.device_nodes == []  # no GPU node for interpreter runs


def test_cupti_teardown_reaches_the_gpu_sandbox_environment_only_when_set() -> None:
    """Settings.profiler_teardown_cupti: kineto reads TEARDOWN_CUPTI from the harness process's environment before
    its first session, and the sandbox clears the worker's environment, so the launch plan's own environment (the
    fork server's, inherited by every child) carries it; off by default, and never for interpreter runs."""
    from kernelproof_core.sandbox.launch import make_plan
    from kernelproof_core.settings import TEARDOWN_CUPTI

    on = make_plan("cuda", sandbox_settings(profiler_teardown_cupti=True), "forkserver")
    assert on.view.env.get(TEARDOWN_CUPTI) == "1"
    argv = bwrap_argv("bwrap", on.view, as_root=True, uid=65534, gid=65534, scratch_bytes=1 << 20)
    assert any(argv[i:i + 3] == ["--setenv", TEARDOWN_CUPTI, "1"] for i in range(len(argv)))
    assert TEARDOWN_CUPTI not in make_plan("cuda", sandbox_settings(), "forkserver").view.env
    assert TEARDOWN_CUPTI not in make_plan("interpreter", sandbox_settings(profiler_teardown_cupti=True),
                                           "forkserver").view.env


def _in_subprocess(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          timeout=60, env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])})


@pytest.mark.skipif(not seccomp_available(), reason="libseccomp unavailable")
def test_seccomp_denies_namespace_and_ptrace_calls() -> None:
    proc = _in_subprocess("""
        import ctypes, errno
        from kernelproof_core.sandbox.seccomp_filter import install_seccomp
        libc = ctypes.CDLL(None, use_errno=True)
        install_seccomp()
        for name, args in (("unshare", (0x10000000,)), ("ptrace", (0, 0, 0, 0))):
            assert getattr(libc, name)(*args) == -1 and ctypes.get_errno() == errno.EPERM, name
        print("ok")
    """)
    assert proc.stdout.strip() == "ok", proc.stderr


@pytest.mark.skipif(landlock_abi() < 1, reason="landlock unavailable")
def test_landlock_confines_writes_to_the_scratch(tmp_path: Path) -> None:
    (tmp_path / "mine").mkdir()
    (tmp_path / "other").mkdir()
    proc = _in_subprocess(f"""
        import sys
        from kernelproof_core.sandbox.landlock import restrict_self
        reads = [p for p in ("/usr", "/lib", "/lib64", "/etc", "/proc", sys.prefix, sys.base_prefix)]
        restrict_self(reads, [{str(tmp_path / "mine")!r}], ["/dev/null"])
        open({str(tmp_path / "mine" / "ok")!r}, "w").write("ok")
        try:
            open({str(tmp_path / "other" / "poison")!r}, "w").write("poison")
            print("escaped")
        except PermissionError:
            print("contained")
    """)
    assert proc.stdout.strip() == "contained", proc.stderr
    assert (tmp_path / "mine" / "ok").exists() and not (tmp_path / "other" / "poison").exists()
