"""Overlapped verification (kernelproof_core/sandbox/overlap.py) with real sandboxed children: several candidates run
at once, every timed phase alone, and each child really waits at its boundaries until released."""

from __future__ import annotations

import itertools
from collections import defaultdict
from collections.abc import Iterator

import pytest

from kernelproof_core.campaign import CandidateJob
from kernelproof_core.sandbox.arbiter import exclusive_windows
from kernelproof_core.sandbox.overlap import OverlappedExecutors
from kernelproof_core.verdicts import Verdict
from tests.sandbox.candidates import source
from tests.sandbox.conftest import CASES, campaign, sandbox_settings, verdicts


@pytest.fixture(scope="module")
def overlapped() -> Iterator[OverlappedExecutors]:
    runner = OverlappedExecutors(2, sandbox_settings(sandbox_standby_children=1))
    yield runner
    runner.close()


def test_overlapped_runs_pass_and_every_timed_phase_runs_alone(overlapped: OverlappedExecutors) -> None:
    jobs = [CandidateJob(task="rms_norm", source=source("honest"), origin="submission", filename=f"c{i}.py")
            for i in range(4)]
    executions = overlapped.execute_many(jobs, campaign(measure=True))
    for execution in executions:
        assert verdicts(execution) == [Verdict.PASS] * len(CASES), execution.outcome.cases
        assert all(case.timing is not None for case in execution.outcome.cases)
    log = list(overlapped.arbiter.log)
    runs = {run for _, run, _ in log}
    assert len(runs) >= 4  # one seat per job (environment probes do not join)
    windows = exclusive_windows(log)
    # Every case's timed phase and every run's arming were exclusive.
    assert len(windows) >= len(jobs) * (len(CASES) + 1)
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
    overlapped.execute_many(jobs, campaign(measure=True))
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
    overlapped.execute_many(jobs, campaign(measure=True))
    log = overlapped.arbiter.log
    first_left = min(t for t, _, e in log if e == "left")
    joined = [t for t, _, e in log if e == "joined"]
    assert len(joined) == 2 and max(joined) < first_left  # the second run started before the first ended
