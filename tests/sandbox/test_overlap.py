"""Overlapped verification (kernelproof_core/sandbox/overlap.py) with real sandboxed children: several candidates run
at once, every timed phase alone, and each child really waits at its boundaries until released."""

from __future__ import annotations

import itertools
from collections import defaultdict
from collections.abc import Iterator

import pytest

from kernelproof_core.campaign import Campaign, CandidateJob
from kernelproof_core.sandbox.arbiter import exclusive_windows
from kernelproof_core.sandbox.overlap import OverlappedExecutors
from kernelproof_core.verdicts import Verdict
from tests.sandbox.candidates import source
from tests.sandbox.conftest import CASES, campaign, sandbox_settings, verdicts

# Honest runs here get a roomier deadline than the suite's DEADLINE_S (8 s, sized for hostile candidates that must
# be killed quickly): two overlapped interpreter runs on a 2-core host take about 6 s each alone, and one hit the 8 s
# deadline in two full-suite runs of 2026-12-02 (an infrastructure flake, not the behaviour under test). The test of a
# death keeps DEADLINE_S: there the timeout is the point.
HONEST_DEADLINE_S = 30.0


def honest_campaign() -> Campaign:
    return campaign(measure=True, execution_timeout_s=HONEST_DEADLINE_S, compile_timeout_s=HONEST_DEADLINE_S)


@pytest.fixture(scope="module")
def overlapped() -> Iterator[OverlappedExecutors]:
    runner = OverlappedExecutors(2, sandbox_settings(sandbox_standby_children=1))
    yield runner
    runner.close()


def test_overlapped_runs_pass_and_every_timed_phase_runs_alone(overlapped: OverlappedExecutors) -> None:
    jobs = [CandidateJob(task="rms_norm", source=source("honest"), origin="submission", filename=f"c{i}.py")
            for i in range(4)]
    executions = overlapped.execute_many(jobs, honest_campaign())
    for execution in executions:
        assert verdicts(execution) == [Verdict.PASS] * len(CASES), execution.outcome.cases
        assert all(case.timing is not None for case in execution.outcome.cases)
    log = list(overlapped.arbiter.log)
    runs = {run for _, run, _ in log}
    assert len(runs) >= 4  # one seat per job (environment probes do not join)
    windows = exclusive_windows(log)
    # Every run's arming and its timed phases (back to back: one window) were exclusive.
    assert len(windows) >= len(jobs) * 2
    for run, start, end in windows:
        others_released = [(t, r) for t, r, e in log if e == "released" and r != run and start < t < end]
        assert not others_released, f"{others_released} went on during {run}'s exclusive phase"
    # Windows never overlap.
    ordered = sorted(windows, key=lambda w: w[1])
    assert all(a[2] <= b[1] for a, b in itertools.pairwise(ordered))


def test_each_child_waits_at_its_boundaries_until_released(overlapped: OverlappedExecutors) -> None:
    """The child's next boundary is reported only after it was released from the previous one: it really stopped."""
    jobs = [CandidateJob(task="rms_norm", source=source("honest"), origin="submission") for _ in range(2)]
    overlapped.arbiter.log.clear()
    overlapped.execute_many(jobs, honest_campaign())
    events: dict[str, list[str]] = defaultdict(list)
    for _, run, event in overlapped.arbiter.log:
        if event in ("reached", "released"):
            events[run].append(event)
    assert events
    for run, seq in events.items():
        assert seq[0] == "reached", (run, seq)
        assert all(a != b for a, b in itertools.pairwise(seq)), (run, seq)  # strictly alternating


def test_overlap_is_faster_than_one_at_a_time_on_a_stream(overlapped: OverlappedExecutors) -> None:
    """Not a benchmark (benchmarks/throughput.py --overlap is): only that overlapping really runs jobs at once."""
    jobs = [CandidateJob(task="rms_norm", source=source("honest"), origin="submission") for _ in range(2)]
    overlapped.arbiter.log.clear()
    overlapped.execute_many(jobs, honest_campaign())
    log = overlapped.arbiter.log
    first_left = min(t for t, _, e in log if e == "left")
    joined = [t for t, _, e in log if e == "joined"]
    assert len(joined) == 2 and max(joined) < first_left  # the second run started before the first ended


def test_a_runs_timed_phases_come_back_to_back(overlapped: OverlappedExecutors) -> None:
    """A child sharing the GPU runs every case's gates first and then its timed phases (pipeline._run_plan, deferred
    measurement), and keeps the GPU from one timed phase to the next: per run, one window for its arming and one
    for all its timed phases, in which it passed a boundary per case."""
    jobs = [CandidateJob(task="rms_norm", source=source("honest"), origin="submission") for _ in range(3)]
    overlapped.arbiter.log.clear()
    overlapped.execute_many(jobs, honest_campaign())
    log = list(overlapped.arbiter.log)
    per_run: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for run, start, end in exclusive_windows(log):
        per_run[run].append((start, end))
    assert len(per_run) == len(jobs)
    for run, windows in per_run.items():
        assert len(windows) == 2, (run, windows)  # arming, then every timed phase
        start, end = sorted(windows)[1]
        continued = [t for t, r, e in log if r == run and e == "continued" and start <= t <= end]
        assert len(continued) == len(CASES) - 1, (run, continued)


def test_a_death_while_measurements_wait_is_the_dying_cases(overlapped: OverlappedExecutors) -> None:
    """Deferred measurement: n1 passed its gates and waits to be timed when tail127's replay call hangs. The timeout
    is tail127's; n1, never timed, is skipped rather than blamed; n1024 is skipped."""
    job = CandidateJob(task="rms_norm", source=source("sleep_on_tail"), origin="submission")
    (execution,) = overlapped.execute_many([job], campaign(measure=True, case_ids=["n1", "tail127", "n1024"]))
    cases = execution.outcome.cases
    assert [c.case_id for c in cases] == ["n1", "tail127", "n1024"]
    assert [c.verdict for c in cases] == [Verdict.SKIPPED, Verdict.EXECUTION_TIMEOUT, Verdict.SKIPPED], cases
    assert cases[0].failure is not None and "not measured" in cases[0].failure.message
    assert cases[0].reward is None and cases[1].reward is not None and cases[1].reward.value == -1.0
