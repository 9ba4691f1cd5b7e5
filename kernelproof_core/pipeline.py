"""Verifying one candidate for one task: load it, run every case through the gates, measure the cases that pass.

This runs in whatever process the caller chose: the sandboxed child (default) or, with --no-sandbox, the caller's
own. It reports progress through `PipelineEvents` so a supervisor can enforce compile and execution deadlines and
keep the results of cases that finished before a kill.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import torch

from kernelproof_core.campaign import Campaign, CandidateJob
from kernelproof_core.candidate import LoadedCandidate, load_candidate, source_sha256
from kernelproof_core.dtypes import parse_dtype
from kernelproof_core.errors import CandidateFailure
from kernelproof_core.gates import (
    call_candidate,
    check_finite,
    check_fresh,
    check_inputs_unchanged,
    check_output_contract,
    check_replay,
    check_tolerance,
    poison_allocator,
    snapshot,
)
from kernelproof_core.interpreter import enable_interpreter
from kernelproof_core.measurement.timing import measure_cuda, measure_interpreter, ring_size
from kernelproof_core.report.models import CandidateInfo, CaseResult, ErrorMetrics, Failure, Timing
from kernelproof_core.reward import case_reward_v1, failed_case_reward_v1
from kernelproof_core.settings import get_settings
from kernelproof_core.tasks import Case, CaseSet, Task, get_task
from kernelproof_core.verdicts import Verdict, is_candidate_fault

log = logging.getLogger(__name__)


class PipelineEvents(Protocol):
    """Progress callbacks. phase is one of: load, compile (first call of a case: JIT), execute."""

    def phase(self, name: str, case_id: str | None = None) -> None: ...

    def case_done(self, result: CaseResult) -> None: ...


class NullEvents:
    def phase(self, name: str, case_id: str | None = None) -> None:
        return None

    def case_done(self, result: CaseResult) -> None:
        return None


@dataclass
class CandidateOutcome:
    candidate: CandidateInfo
    cases: list[CaseResult] = field(default_factory=list)


def derive_seed(*parts: object) -> int:
    """A 63-bit seed from the campaign seed and the case's identity: stable across hosts and Python versions."""
    digest = hashlib.sha256("/".join(str(p) for p in parts).encode()).digest()
    return int.from_bytes(digest[:8], "little") & ((1 << 63) - 1)


def torch_device(campaign: Campaign) -> torch.device:
    return torch.device("cuda") if campaign.device == "cuda" else torch.device("cpu")


def planned_cases(task: Task, campaign: Campaign) -> list[Case]:
    cases = task.cases(campaign.case_set, campaign.seed)
    if campaign.case_ids is not None:
        wanted = set(campaign.case_ids)
        cases = [c for c in cases if c.case_id in wanted]
    return cases


def prepare_process(campaign: Campaign) -> None:
    """Process-wide settings a run needs before any candidate is loaded (the interpreter flag is read by @jit)."""
    if campaign.device == "interpreter":
        enable_interpreter()


def verify_candidate(job: CandidateJob, campaign: Campaign, events: PipelineEvents | None = None) -> CandidateOutcome:
    """Run every (dtype, case) of the campaign for one candidate and return per-case results."""
    events = events or NullEvents()
    prepare_process(campaign)
    task = get_task(job.task)
    info = CandidateInfo(
        task=task.name,
        origin=job.origin,
        path=None if job.origin == "submission" else job.filename,
        source_sha256=source_sha256(job.source),
        size_bytes=len(job.source),
    )
    outcome = CandidateOutcome(candidate=info)
    events.phase("load")
    loaded: LoadedCandidate | None = None
    load_failure: CandidateFailure | None = None
    try:
        loaded = load_candidate(job.source, job.filename)
    except CandidateFailure as failure:
        load_failure = failure
    device = torch_device(campaign)
    for dtype_name in campaign.dtypes:
        dtype = parse_dtype(dtype_name)
        for case in planned_cases(task, campaign):
            if loaded is None:
                assert load_failure is not None
                result = _result(task, case, dtype, [], load_failure.verdict, None, None)
                result.failure = Failure(code=load_failure.verdict, message=load_failure.message,
                                         detail=load_failure.detail)
                result.reward = failed_case_reward_v1()
            else:
                result = run_case(task, case, dtype, loaded, campaign, device, events)
            outcome.cases.append(result)
            events.case_done(result)
    return outcome


def _result(
    task: Task,
    case: Case,
    dtype: torch.dtype,
    inputs: Sequence[Any],
    verdict: Verdict,
    error: ErrorMetrics | None,
    timing: Timing | None,
) -> CaseResult:
    from kernelproof_core.dtypes import dtype_name

    tensors = [x for x in inputs if isinstance(x, torch.Tensor)]
    return CaseResult(
        task=task.name,
        dtype=dtype_name(dtype),
        case_id=case.case_id,
        case_kind=case.kind.value,
        description=case.description,
        dims=dict(case.dims),
        input_shapes=[list(t.shape) for t in tensors],
        input_strides=[list(t.stride()) for t in tensors],
        output_shape=list(task.output_spec(case, dtype).shape),
        verdict=verdict,
        tolerance=task.tolerance(dtype).as_dict(),
        error=error,
        timing=timing,
    )


def run_case(
    task: Task,
    case: Case,
    dtype: torch.dtype,
    loaded: LoadedCandidate,
    campaign: Campaign,
    device: torch.device,
    events: PipelineEvents,
) -> CaseResult:
    """Gates 2-6, then measurement. Candidate faults become verdicts; our own faults become infra_error."""
    policy = task.tolerance(dtype)
    spec = task.output_spec(case, dtype)
    seed = derive_seed(campaign.seed, task.name, dtype, case.case_id)
    inputs: Sequence[Any] = []
    metrics: ErrorMetrics | None = None
    try:
        inputs = task.make_inputs(case, dtype, device, torch.Generator().manual_seed(seed))
        originals = snapshot(inputs)
        out_bytes = int(torch.Size(spec.shape).numel()) * torch.empty((), dtype=dtype).element_size()
        # Gate 2: the candidate runs before this case's oracle exists, into poisoned allocator memory.
        poison_allocator(device, out_bytes)
        events.phase("compile", case.case_id)
        out = check_output_contract(call_candidate(loaded.fn, inputs, device), spec, device)
        events.phase("execute", case.case_id)
        check_inputs_unchanged(inputs, originals)
        reference = task.oracle(inputs)
        check_finite(out, reference)  # gate 3
        metrics = check_tolerance(out, reference, policy)  # gate 4
        replay = check_output_contract(call_candidate(loaded.fn, snapshot(originals), device), spec, device)
        check_replay(out, replay)  # gate 5
        fresh_inputs = task.make_inputs(case, dtype, device, torch.Generator().manual_seed(seed ^ 0x5EED))
        fresh_out = check_output_contract(call_candidate(loaded.fn, fresh_inputs, device), spec, device)
        fresh_reference = task.oracle(fresh_inputs)
        check_finite(fresh_out, fresh_reference)
        check_fresh(out, reference, fresh_out, fresh_reference, policy)  # gate 6
        del out, replay, fresh_out, reference, fresh_inputs, fresh_reference
    except CandidateFailure as failure:
        result = _result(task, case, dtype, inputs, failure.verdict, getattr(failure, "metrics", metrics), None)
        result.failure = Failure(code=failure.verdict, message=failure.message, detail=failure.detail)
        result.reward = failed_case_reward_v1()
        return result
    except Exception as exc:  # our code failed (oracle, input generation): never the candidate's fault
        log.exception("infrastructure fault in case %s/%s", task.name, case.case_id)
        result = _result(task, case, dtype, inputs, Verdict.INFRA_ERROR, metrics, None)
        result.failure = Failure(code=Verdict.INFRA_ERROR, message=f"{type(exc).__name__}: {exc}"[:2000])
        return result

    result = _result(task, case, dtype, inputs, Verdict.PASS, metrics, None)
    if campaign.measure:
        try:
            result.timing = measure_case(task, case, dtype, loaded, campaign, device, inputs, seed)
        except CandidateFailure as failure:
            result.verdict = failure.verdict
            result.failure = Failure(code=failure.verdict, message=failure.message, detail=failure.detail)
        except Exception as exc:
            log.exception("measurement fault in case %s/%s", task.name, case.case_id)
            result.verdict = Verdict.INFRA_ERROR
            result.failure = Failure(code=Verdict.INFRA_ERROR, message=f"measurement: {type(exc).__name__}: {exc}")
    result.reward = _case_reward(result)
    return result


def _case_reward(result: CaseResult) -> Any:
    if result.verdict is not Verdict.PASS:
        return failed_case_reward_v1() if is_candidate_fault(result.verdict) else None
    t = result.timing
    if t is None or t.kind != "cuda_events":
        return None
    return case_reward_v1(t.baseline.median, t.candidate.median, t.candidate.cv)


def measure_case(
    task: Task,
    case: Case,
    dtype: torch.dtype,
    loaded: LoadedCandidate,
    campaign: Campaign,
    device: torch.device,
    first_inputs: Sequence[Any],
    seed: int,
) -> Timing:
    """Time candidate and baseline on the same rotated inputs (see measurement.timing)."""
    settings = get_settings()
    min_bytes = task.min_bytes(case, dtype)
    baseline = task.baseline()
    fn = loaded.fn
    if device.type == "cuda":
        n_sets = ring_size(min_bytes, settings.input_ring_min_bytes, settings.input_ring_max_sets,
                           settings.input_ring_max_bytes)
        sets = [first_inputs] + [
            task.make_inputs(case, dtype, device, torch.Generator().manual_seed(seed + 1 + i))
            for i in range(n_sets - 1)
        ]
        pair = measure_cuda(
            fn, baseline, sets,
            warmups=campaign.warmups, samples=campaign.samples, invocations=campaign.invocations_per_sample,
            l2_flush_bytes=settings.l2_flush_bytes, profiler_invocations=settings.profiler_invocations,
            max_sample_ms=settings.max_sample_ms,
        )
        kind = "cuda_events"
        invocations = pair.invocations
        samples = campaign.samples
        warmups = campaign.warmups
        flush = settings.l2_flush_bytes
    else:
        n_sets = 1
        samples = campaign.samples
        pair = measure_interpreter(fn, baseline, [first_inputs], samples)
        kind, invocations, warmups, flush = "interpreter_wall_clock", 1, 0, 0
    bandwidth = min_bytes / (pair.candidate.median * 1e-6) / 1e9 if kind == "cuda_events" else None
    return Timing(
        kind=kind,
        warmups=warmups,
        samples=samples,
        invocations_per_sample=invocations,
        input_sets=n_sets,
        l2_flush_bytes=flush,
        candidate=pair.candidate,
        baseline=pair.baseline,
        candidate_device_us=pair.candidate_device_us,
        baseline_device_us=pair.baseline_device_us,
        device_time_source=pair.device_time_source,
        reward_input="median launch-inclusive latency per call (CUDA events), candidate vs baseline"
        if kind == "cuda_events" else "none: interpreter timings never feed a reward",
        speedup=pair.baseline.median / pair.candidate.median if pair.candidate.median > 0 else 0.0,
        achieved_bandwidth_gbps=bandwidth,
        min_bytes=min_bytes,
        note=pair.note,
    )


__all__ = ["CandidateOutcome", "CaseSet", "PipelineEvents", "verify_candidate"]
