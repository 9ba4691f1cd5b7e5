"""Turning a supervised run into the complete list of case results a report needs.

A report always lists every planned (dtype, case). Cases the child reported keep their results. When the
process ended abnormally, the case that was running gets the death's verdict and later cases are `skipped`; a
death while the module was still loading applies to every case (as a load failure does in the pipeline).
Infrastructure failures mark every unreported case `infra_error` and carry no reward. Fork failures counted by
the pids cgroup turn the affected case's failure into `resource_limit`.
"""

from __future__ import annotations

from dataclasses import dataclass

from kernelproof_core.campaign import Campaign, CandidateJob
from kernelproof_core.dtypes import dtype_name, parse_dtype
from kernelproof_core.pipeline import planned_cases
from kernelproof_core.report.models import CaseResult, Failure
from kernelproof_core.reward import failed_case_reward
from kernelproof_core.sandbox.deaths import PIDS_MESSAGE
from kernelproof_core.tasks import Case, Task, get_task
from kernelproof_core.verdicts import Verdict, is_candidate_fault


@dataclass(frozen=True)
class PlannedCase:
    task: Task
    dtype: str
    case: Case


def plan(job: CandidateJob, campaign: Campaign) -> list[PlannedCase]:
    """Every (dtype, case) the pipeline will run, in its order. Raises UsageError for an unknown task."""
    task = get_task(job.task)
    cases = planned_cases(task, campaign)
    return [PlannedCase(task, dtype_name(parse_dtype(d)), c) for d in campaign.dtypes for c in cases]


def skeleton(p: PlannedCase, verdict: Verdict, message: str, detail: str | None = None) -> CaseResult:
    """A result for a case that produced none of its own (inputs were never made in this process)."""
    dtype = parse_dtype(p.dtype)
    reward = failed_case_reward() if is_candidate_fault(verdict) else None
    return CaseResult(
        task=p.task.name,
        dtype=p.dtype,
        case_id=p.case.case_id,
        case_kind=p.case.kind.value,
        description=p.case.description,
        dims=dict(p.case.dims),
        input_shapes=[],
        input_strides=[],
        output_shape=list(p.task.output_spec(p.case, dtype).shape),
        verdict=verdict,
        failure=Failure(code=verdict, message=message, detail=detail),
        tolerance=p.task.tolerance(dtype).as_dict(),
        reward=reward,
    )


def relabel_fork_failure(result: CaseResult, max_processes: int) -> None:
    """A case that failed while the pids cgroup refused a fork failed because of the process limit."""
    if result.verdict is Verdict.PASS or not is_candidate_fault(result.verdict):
        return
    original = result.failure.message if result.failure else result.verdict.value
    result.verdict = Verdict.RESOURCE_LIMIT
    result.failure = Failure(code=Verdict.RESOURCE_LIMIT,
                             message=PIDS_MESSAGE.format(max_processes=max_processes, original=original[:300]),
                             detail=result.failure.detail if result.failure else None)
    result.reward = failed_case_reward()


def complete(planned: list[PlannedCase], reported: list[CaseResult], verdict: Verdict | None, message: str,
             detail: str | None, died_loading: bool, last_case: str | None = None) -> list[CaseResult]:
    """Reported results plus a result for every planned case that has none. `last_case` (the case of the child's
    last phase) may lie beyond the first unreported case when measurements were deferred: the death is then that
    case's, and the unreported cases before it, whose gates passed but whose timing had not run, are `skipped`."""
    cases = list(reported)
    ahead = next((i for i, p in enumerate(planned) if p.case.case_id == last_case and i > len(cases)), None)
    if verdict is not None and verdict is not Verdict.INFRA_ERROR and not died_loading and ahead is not None:
        dying = planned[ahead].case.case_id
        unmeasured = f"not measured: the candidate process ended during case {dying} ({verdict.value})"
        cases += [skeleton(p, Verdict.SKIPPED, unmeasured) for p in planned[len(cases):ahead]]
    if not planned:
        return cases
    if verdict is None:
        if len(cases) == len(planned):
            return cases
        verdict, message = Verdict.CRASHED, "the candidate process finished without reporting every case"
    remaining = planned[len(cases):]
    if not remaining:  # died after its last case: the last case carries the death
        last = cases[-1]
        last.verdict = verdict
        last.failure = Failure(code=verdict, message=f"after its last case: {message}", detail=detail)
        last.reward = failed_case_reward() if is_candidate_fault(verdict) else None
        return cases
    if verdict is Verdict.INFRA_ERROR or died_loading:
        return cases + [skeleton(p, verdict, message, detail) for p in remaining]
    first, *rest = remaining
    skipped = f"not run: the candidate process ended during case {first.case.case_id} ({verdict.value})"
    return cases + [skeleton(first, verdict, message, detail)] + [
        skeleton(p, Verdict.SKIPPED, skipped) for p in rest]
