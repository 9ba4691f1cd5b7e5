"""The one entry point everyone calls (CLI, Celery worker, embedded service): verify candidates, build the report.

Where candidate code runs is an executor's business: `InProcessExecutor` (trusted local debugging, `--no-sandbox`)
or the sandboxed runner in `kernelproof_core.sandbox` (the default). Both return the same `Execution`.
"""

from __future__ import annotations

import math
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Protocol

from kernelproof_core.campaign import Campaign, CandidateJob
from kernelproof_core.environment import collect_environment
from kernelproof_core.measurement.speed_of_light import rebase
from kernelproof_core.pipeline import CandidateOutcome, PipelineEvents, verify_candidate
from kernelproof_core.report.models import (
    CandidateInfo,
    CaseResult,
    Environment,
    Isolation,
    Report,
    RunConfig,
    Summary,
)
from kernelproof_core.reward import AGGREGATE_RULE_V1, CURRENT_REWARD, aggregate_v1
from kernelproof_core.verdicts import Verdict, is_candidate_fault, worst


@dataclass
class Execution:
    outcome: CandidateOutcome
    environment: Environment
    isolation: Isolation


class Executor(Protocol):
    def execute(self, job: CandidateJob, campaign: Campaign, events: PipelineEvents | None = None) -> Execution: ...

    def execute_many(self, jobs: Sequence[CandidateJob], campaign: Campaign,
                     events: PipelineEvents | None = None) -> list[Execution]: ...

    def close(self) -> None: ...


class OneAtATime:
    """execute_many as a loop over execute (executors that run one candidate at a time)."""

    def execute(self, job: CandidateJob, campaign: Campaign, events: PipelineEvents | None = None) -> Execution:
        raise NotImplementedError

    def execute_many(self, jobs: Sequence[CandidateJob], campaign: Campaign,
                     events: PipelineEvents | None = None) -> list[Execution]:
        return [self.execute(job, campaign, events) for job in jobs]

    def close(self) -> None:
        return None


def _no_sandbox() -> Isolation:
    from kernelproof_core.sandbox.layers import REQUIRED_FOR_UNTRUSTED

    return Isolation(
        sandboxed=False,
        layers=[],
        missing_layers=list(REQUIRED_FOR_UNTRUSTED),
        note="--no-sandbox: candidate code ran inside the verifier's own process (trusted local debugging only)",
    )


class InProcessExecutor(OneAtATime):
    """Runs the candidate in this very process. Only for trusted code: the candidate can do anything we can."""

    def execute(self, job: CandidateJob, campaign: Campaign, events: PipelineEvents | None = None) -> Execution:
        outcome = verify_candidate(job, campaign, events)
        return Execution(outcome, collect_environment(campaign.device), _no_sandbox())


def run_verification(
    jobs: list[CandidateJob],
    campaign: Campaign,
    executor: Executor,
    command: str = "verify",
    events: PipelineEvents | None = None,
) -> Report:
    """Verify each job with `executor` and assemble one report."""
    started = time.monotonic()
    created = datetime.now(UTC)
    executions = executor.execute_many(jobs, campaign, events)
    return build_report(
        command=command,
        campaign=campaign,
        candidates=[e.outcome.candidate for e in executions],
        cases=[c for e in executions for c in e.outcome.cases],
        environment=executions[0].environment,
        isolation=executions[0].isolation,
        created=created,
        duration_s=time.monotonic() - started,
    )


def build_report(
    *,
    command: str,
    campaign: Campaign,
    candidates: list[CandidateInfo],
    cases: list[CaseResult],
    environment: Environment,
    isolation: Isolation,
    created: datetime,
    duration_s: float,
) -> Report:
    config = RunConfig(
        command=command,
        tasks=sorted({c.task for c in candidates}),
        dtypes=list(campaign.dtypes),
        device=campaign.device,
        case_set=campaign.case_set.value,
        seed=campaign.seed,
        warmups=campaign.warmups,
        samples=campaign.samples,
        invocations_per_sample=campaign.invocations_per_sample,
        measure=campaign.measure,
        stopping=campaign.stopping,
    )
    reference = environment.gpu.copy_bandwidth_gbps if environment.gpu else None
    cases = [_with_reference(c, reference) for c in cases]
    return Report(
        run_id=uuid.uuid4().hex,
        created_at=created,
        duration_s=duration_s,
        config=config,
        environment=environment,
        isolation=isolation,
        candidates=candidates,
        cases=cases,
        summary=summarize_cases(cases, campaign),
    )


def _with_reference(case: CaseResult, copy_gbps: float | None) -> CaseResult:
    """Speed of light over the better copy measurement: the verifying process's quick probe or the environment's."""
    if case.timing is None:
        return case
    update = rebase(case.timing.model_dump(), copy_gbps)
    return case.model_copy(update={"timing": case.timing.model_copy(update=update)}) if update else case


def summarize_cases(cases: list[CaseResult], campaign: Campaign) -> Summary:
    verdicts = [c.verdict for c in cases]
    overall = worst(verdicts)
    failed = [c for c in cases if c.verdict is not Verdict.PASS]
    any_candidate_failure = any(is_candidate_fault(c.verdict) for c in failed)
    rewards = [c.reward.value if c.reward else None for c in cases]
    reward = aggregate_v1(rewards, any_candidate_failure) if overall is not Verdict.INFRA_ERROR else None
    note = None
    if overall is Verdict.INFRA_ERROR:
        note = "infrastructure fault: no reward; the run says nothing about the candidate"
    elif reward is None and campaign.device == "interpreter":
        note = "interpreter run: verdicts are real, timings are not GPU time, no speed reward"
    elif reward is None and not campaign.measure:
        note = "measurement disabled: no speed reward"
    speedups = [c.timing.speedup for c in cases if c.timing and c.timing.kind == "cuda_events"]
    geomean = None
    if speedups and len(speedups) == len(cases):
        geomean = math.exp(sum(math.log(s) for s in speedups) / len(speedups))
    return Summary(
        verdict=overall,
        cases_total=len(cases),
        cases_passed=len(cases) - len(failed),
        cases_failed=len(failed),
        first_failure=failed[0].failure if failed else None,
        reward=reward,
        reward_spec=CURRENT_REWARD,
        aggregate_rule=AGGREGATE_RULE_V1,
        geomean_speedup=geomean,
        reward_note=note,
    )
