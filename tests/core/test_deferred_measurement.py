"""Deferred measurement (pipeline._run_plan): a run sharing the GPU gets every case's gates first, then its timed
phases back to back, while results still reach the caller in plan order (a supervisor attributes a death to the
first unreported case). Real Triton kernels under the interpreter."""

from __future__ import annotations

import pytest

from kernelproof_core.campaign import Campaign, CandidateJob
from kernelproof_core.pipeline import verify_candidate
from kernelproof_core.report.models import CaseResult
from kernelproof_core.tasks import CaseSet
from kernelproof_core.verdicts import Verdict
from tests.candidates.rms_norm_variants import source


class Recorder:
    def __init__(self, defer: bool) -> None:
        self.defer_measurement = defer
        self.seen: list[tuple[str, str | None]] = []

    def phase(self, name: str, case_id: str | None = None) -> None:
        self.seen.append((name, case_id))

    def case_done(self, result: CaseResult) -> None:
        self.seen.append(("done", result.case_id))


def _run(variant: str, defer: bool) -> tuple[Recorder, list[CaseResult]]:
    campaign = Campaign(device="interpreter", dtypes=["float32"], case_set=CaseSet.INTERPRETER,
                        case_ids=["n1", "tail127"], measure=True, samples=1)
    events = Recorder(defer)
    cases = verify_candidate(CandidateJob(task="rms_norm", source=source(variant)), campaign, events).cases
    return events, cases


def _per_case(seen: list[tuple[str, str | None]]) -> list[tuple[str, str | None]]:
    return [(name, case) for name, case in seen if case is not None]


def test_measure_phases_follow_every_gate_and_results_keep_plan_order() -> None:
    events, cases = _run("honest", defer=True)
    assert [c.verdict for c in cases] == [Verdict.PASS, Verdict.PASS]
    assert all(c.timing is not None for c in cases)
    assert _per_case(events.seen) == [
        ("compile", "n1"), ("execute", "n1"), ("compile", "tail127"), ("execute", "tail127"),
        ("measure", "n1"), ("done", "n1"), ("measure", "tail127"), ("done", "tail127"),
    ]


def test_a_failed_case_is_reported_after_the_measurement_planned_before_it() -> None:
    events, cases = _run("tail_bug", defer=True)
    assert [c.case_id for c in cases] == ["n1", "tail127"]
    assert cases[0].verdict is Verdict.PASS and cases[0].timing is not None
    assert cases[1].verdict is Verdict.TOLERANCE
    order = _per_case(events.seen)
    assert order.index(("measure", "n1")) > order.index(("execute", "tail127"))
    assert order.index(("done", "n1")) < order.index(("done", "tail127"))


@pytest.mark.parametrize("defer", [False, True])
def test_deferral_changes_the_order_only(defer: bool) -> None:
    events, cases = _run("honest", defer=defer)
    assert [c.verdict for c in cases] == [Verdict.PASS, Verdict.PASS]
    order = _per_case(events.seen)
    if not defer:
        assert order.index(("measure", "n1")) < order.index(("compile", "tail127"))
