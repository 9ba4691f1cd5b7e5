"""Hostile candidates end with the right verdict, the supervisor stays healthy, and the next honest candidate
passes. Each candidate is self-limiting (see tests/sandbox/candidates), so a broken watchdog fails a test instead of
hanging the suite."""

from __future__ import annotations

import socket
import threading
import time
from pathlib import Path

import pytest

from kernelproof_core.sandbox import SandboxExecutor
from kernelproof_core.verdicts import Verdict
from tests.sandbox.conftest import (
    DEADLINE_S,
    assert_honest_passes,
    campaign,
    run,
    sandbox_settings,
    sandbox_states,
    verdicts,
)

P, S = Verdict.PASS, Verdict.SKIPPED

# candidate -> (expected verdicts of the two cases, substring of the first failure's message)
ENDINGS: dict[str, tuple[list[Verdict], str]] = {
    "import_loop": ([Verdict.COMPILE_TIMEOUT] * 2, "compile deadline of 8 s exceeded while importing the candidate"),
    "first_call_loop": ([Verdict.COMPILE_TIMEOUT, S], "exceeded in the first call of case n1 (Triton's JIT compile"),
    "second_call_sleep": ([Verdict.EXECUTION_TIMEOUT, S], "exceeded in case n1's later calls"),
    "exit_during_run": ([Verdict.CRASHED, S], "exited with status 0 before finishing"),
    "segfault": ([Verdict.CRASHED, S], "SIGSEGV"),
    "memory_bomb": ([Verdict.RESOURCE_LIMIT, S], "host memory"),
    "fork_bomb": ([Verdict.RESOURCE_LIMIT] * 2, "process limit"),
    "fork_bomb_import": ([Verdict.RESOURCE_LIMIT] * 2, "process limit"),
    "stdout_flood": ([Verdict.RESOURCE_LIMIT, S], "byte cap"),
    "channel_garbage": ([Verdict.CRASHED, S], "protocol violation"),
    "fake_report": ([Verdict.TOLERANCE] * 2, "outside atol"),
    # Containment checks: these pass only when every escape attempt failed inside the sandbox.
    "syscalls": ([P, P], ""),
    "kill_server": ([P, P], ""),
    "env_secret": ([P, P], ""),
}


@pytest.mark.parametrize("name", list(ENDINGS))
def test_hostile_candidate_ends_with_the_right_verdict(executor: SandboxExecutor, name: str) -> None:
    expected, message = ENDINGS[name]
    started = time.monotonic()
    execution = run(executor, name)
    cases = execution.outcome.cases
    assert verdicts(execution) == expected, [(c.verdict, c.failure) for c in cases]
    if message:
        assert cases[0].failure is not None and message in cases[0].failure.message, cases[0].failure
    assert time.monotonic() - started < 2 * DEADLINE_S + 10
    assert execution.isolation.sandboxed
    assert_honest_passes(executor)


def test_a_kill_keeps_the_results_of_finished_cases(executor: SandboxExecutor) -> None:
    """The running case gets the timeout, earlier cases keep their results, later ones are skipped."""
    execution = run(executor, "sleep_on_tail", campaign(case_ids=["n1", "tail127", "n1024"]))
    cases = execution.outcome.cases
    assert [c.case_id for c in cases] == ["n1", "tail127", "n1024"]
    assert verdicts(execution) == [P, Verdict.EXECUTION_TIMEOUT, S], [(c.verdict, c.failure) for c in cases]
    assert cases[0].error is not None  # a real result, not a placeholder
    assert cases[1].reward is not None and cases[1].reward.value == -1.0
    assert cases[2].reward is None and cases[2].failure is not None
    assert "ended during case tail127" in cases[2].failure.message
    assert_honest_passes(executor)


def test_no_network_not_even_to_the_hosts_loopback(executor: SandboxExecutor) -> None:
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.2)
    port = listener.getsockname()[1]
    accepted: list[bytes] = []

    def accept() -> None:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            accepted.append(conn.recv(100))
            conn.close()

    stop = threading.Event()
    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        execution = run(executor, "net_connect", PORT=str(port))
    finally:
        stop.set()
        thread.join()
        listener.close()
    assert accepted == []
    assert verdicts(execution) == [P, P], execution.outcome.cases
    assert_honest_passes(executor)


def test_writes_outside_scratch_fail_and_leave_nothing(executor: SandboxExecutor, tmp_path: Path) -> None:
    watched = tmp_path / "watched"
    watched.mkdir()
    watched.chmod(0o777)  # writable by anyone on the host: only the sandbox can stop the candidate
    execution = run(executor, "write_escape", HOST_PATH=repr(str(watched)))
    assert verdicts(execution) == [P, P], execution.outcome.cases
    assert list(watched.iterdir()) == []
    assert not (tmp_path / "POISON").exists()
    assert_honest_passes(executor)


def test_nothing_survives_into_the_next_candidate() -> None:
    """Poisoned scratch, HOME, Triton cache and a daemonised process are all gone for the next candidate. Checked
    from inside, so without standby children (a candidate sees their pids and could not tell them from a daemon);
    the next test checks the same sweep with standbys, from the host."""
    executor = SandboxExecutor(sandbox_settings(sandbox_standby_children=0))
    try:
        assert verdicts(run(executor, "poison_cache")) == [P, P]
        execution = run(executor, "leftover_check")
        assert verdicts(execution) == [P, P], execution.outcome.cases
    finally:
        executor.close()


def test_daemons_are_swept_while_standby_children_live(executor: SandboxExecutor) -> None:
    """With standbys (children forked ahead of their job) alive beside it, a candidate's daemonised process is
    still killed when it ends, and the standbys survive that sweep and serve the next candidates."""
    assert_honest_passes(executor)
    before = sandbox_states(executor)
    assert len(executor._standbys["interpreter"]) == executor.settings.sandbox_standby_children  # refilled
    assert verdicts(run(executor, "poison_cache")) == [P, P]
    after = sandbox_states(executor)
    assert len(after) == len(before), (before, after)  # one standby used, one forked: no daemon left
    assert_honest_passes(executor)
    assert_honest_passes(executor)
