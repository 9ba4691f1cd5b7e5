"""Verifying one candidate for one task: load it, run every case through the gates, measure the cases that pass.

This runs in whatever process the caller chose: the sandboxed child (default) or, with --no-sandbox, the caller's
own. It reports progress through `PipelineEvents` so a supervisor can enforce compile and execution deadlines and
keep the results of cases that finished before a kill.

The cheat checks (kernelproof_core/integrity) are armed before any candidate code runs: the plan of cases, the
device's copy bandwidth and a snapshot of the harness are taken first; then the static policy (if enabled) is
applied to the source, the module is loaded, and every candidate call is observed.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import torch

from kernelproof_core.campaign import Campaign, CandidateJob
from kernelproof_core.candidate import LoadedCandidate, load_candidate, source_sha256
from kernelproof_core.dtypes import dtype_name, parse_dtype
from kernelproof_core.errors import CandidateFailure, UsageError
from kernelproof_core.gates import CaseGates
from kernelproof_core.integrity import dependent_launch
from kernelproof_core.integrity.audit import SampleAuditor
from kernelproof_core.integrity.device_fault import describes_device_fault, is_device_fault
from kernelproof_core.integrity.hidden_cases import derive_seed, hidden_cases, input_seed
from kernelproof_core.integrity.launches import owner_kernel_names
from kernelproof_core.integrity.plausibility import check_plausible, check_timed_region, time_floor_us
from kernelproof_core.integrity.proof import check_gpu_share
from kernelproof_core.integrity.run import RunIntegrity, arm, enforce_policy, warm_up_process
from kernelproof_core.interpreter import compiled_mode_fixed, enable_interpreter
from kernelproof_core.measurement.clocks import ClockMonitor, ClockSummary
from kernelproof_core.measurement.speed_of_light import REWARD_INPUT_CUDA, speed_of_light
from kernelproof_core.measurement.timing import measure_cuda, measure_interpreter, ring_input_sets
from kernelproof_core.report.models import CandidateInfo, CaseResult, ErrorMetrics, Failure, Integrity, Timing
from kernelproof_core.reward import case_reward, failed_case_reward
from kernelproof_core.settings import TEARDOWN_CUPTI, get_settings
from kernelproof_core.tasks import Case, CaseSet, Task, get_task
from kernelproof_core.verdicts import Verdict, is_candidate_fault

log = logging.getLogger(__name__)


class PipelineEvents(Protocol):
    """Progress callbacks. phase is one of: prepare and arm (setup before any candidate code; timestamps only),
    load, compile (first call of a case: JIT), execute (correctness and cheat checks), measure (timing).

    An implementation with a true `defer_measurement` attribute gets every case's gates first and then the measure
    phases back to back (see _run_plan): a sandbox child sharing the GPU asks for that, so that its exclusive
    timing is one stretch, not one per case between other runs' phases."""

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


def torch_device(campaign: Campaign) -> torch.device:
    return torch.device("cuda") if campaign.device == "cuda" else torch.device("cpu")


def planned_cases(task: Task, campaign: Campaign) -> list[Case]:
    """The documented cases (restricted to case_ids) plus the campaign's hidden cases, in run order."""
    cases = task.cases(campaign.case_set, campaign.seed)
    if campaign.case_ids is not None:
        wanted = set(campaign.case_ids)
        cases = [c for c in cases if c.case_id in wanted]
    return cases + hidden_cases(task, campaign)


def prepare_process(campaign: Campaign) -> None:
    """Process-wide settings a run needs before any candidate is loaded (the interpreter flag is read by @jit), and
    the cheat checks' lazy imports and first uses, so the harness snapshot sees the process as it will stay."""
    prepare_device(campaign.device)


def prepare_device(device: str) -> None:
    """prepare_process for a device, without a campaign: a sandboxed child does this before its job arrives (on
    CUDA it creates the context and pays CUPTI's start-up), and verify_candidate's call is then a no-op."""
    if device == "interpreter":
        if compiled_mode_fixed():  # Triton's own @jit helpers are compiled-mode objects: every kernel would fail
            raise UsageError("this process imported Triton in compiled mode; an interpreter campaign needs a process "
                             "of its own (the sandbox gives it one) or TRITON_INTERPRET=1 before Triton is imported")
        enable_interpreter()
    elif get_settings().profiler_teardown_cupti:  # in-process runs; a sandboxed child has it from its server's env
        os.environ.setdefault(TEARDOWN_CUPTI, "1")
    warm_up_process(device)


def verify_candidate(job: CandidateJob, campaign: Campaign, events: PipelineEvents | None = None) -> CandidateOutcome:
    """Run every (dtype, case) of the campaign for one candidate and return per-case results."""
    events = events or NullEvents()
    events.phase("prepare")
    prepare_process(campaign)
    task = get_task(job.task)
    device = torch_device(campaign)
    plan = [(parse_dtype(d), case) for d in campaign.dtypes for case in planned_cases(task, campaign)]
    events.phase("arm")
    integrity = arm(campaign, device)
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
        if campaign.static_policy:
            enforce_policy(job.source)
        loaded = load_candidate(job.source, job.filename)
        integrity.attach(loaded.module.__dict__, device)  # tampering while the module body ran
    except CandidateFailure as exc:
        load_failure = exc
    try:
        _run_plan(task, plan, loaded, load_failure, campaign, device, events, integrity, outcome)
    finally:
        integrity.restore()  # a process that goes on verifying must not inherit what this candidate changed
    return outcome


@dataclass
class _Deferred:
    """A case whose gates passed and whose measurement waits for the end of the plan."""

    case: Case
    dtype: torch.dtype
    run: Callable[[], CaseResult]


def _run_plan(task: Task, plan: list[tuple[torch.dtype, Case]], loaded: LoadedCandidate | None,
              load_failure: CandidateFailure | None, campaign: Campaign, device: torch.device,
              events: PipelineEvents, integrity: RunIntegrity, outcome: CandidateOutcome) -> None:
    """Every case in plan order. Results are reported in plan order too (a supervisor attributes a death to the
    first unreported case), so with deferred measurement a case waits for the measurements planned before it."""
    defer = campaign.measure and bool(getattr(events, "defer_measurement", False))
    slots: list[CaseResult | _Deferred] = []

    def report_ready() -> None:
        while len(outcome.cases) < len(slots) and isinstance(ready := slots[len(outcome.cases)], CaseResult):
            outcome.cases.append(ready)
            events.case_done(ready)

    for dtype, case in plan:
        if load_failure is None and integrity.tampered is None and integrity.campaign_changed(campaign):
            integrity.tampered = "the campaign object was modified"
        if load_failure is not None or _ended(integrity) or loaded is None:
            slots.append(_not_run(task, case, dtype, load_failure, integrity))
        else:
            ran = _gate_case(task, case, dtype, loaded, campaign, device, events, integrity, defer)
            slots.append(ran)
            if isinstance(ran, CaseResult):
                _note_run_ending(ran, case, integrity)
        report_ready()
    for i, slot in enumerate(slots):
        if isinstance(slot, _Deferred):
            if _ended(integrity):
                done = _not_run(task, slot.case, slot.dtype, None, integrity)
            else:
                done = slot.run()
                _note_run_ending(done, slot.case, integrity)
            slots[i] = done
            report_ready()


def _device_fault(when: str, exc: BaseException) -> CandidateFailure:
    return CandidateFailure(Verdict.RUNTIME_ERROR, f"device fault {when}: {type(exc).__name__}: {exc}"[:2000])


def _ended(integrity: RunIntegrity) -> bool:
    """No later case can run: the harness was altered, or the candidate's kernels faulted the device."""
    return integrity.tampered is not None or integrity.device_fault is not None


def _not_run(task: Task, case: Case, dtype: torch.dtype, load_failure: CandidateFailure | None,
             integrity: RunIntegrity) -> CaseResult:
    if load_failure is not None:
        ended = load_failure
    elif integrity.tampered is not None:
        ended = CandidateFailure(Verdict.TAMPERING, f"not run: the harness was altered earlier ({integrity.tampered})")
    else:
        ended = CandidateFailure(Verdict.RUNTIME_ERROR, "not run: the candidate's kernels faulted the device earlier "
                                 f"and the CUDA context is lost ({integrity.device_fault})")
    result = _result(task, case, dtype, [], ended.verdict, None, None)
    result.failure = Failure(code=ended.verdict, message=ended.message, detail=ended.detail)
    result.reward = failed_case_reward()
    return result


def _note_run_ending(result: CaseResult, case: Case, integrity: RunIntegrity) -> None:
    if result.verdict is Verdict.TAMPERING and result.failure is not None:
        integrity.tampered = f"case {case.case_id}: {result.failure.message}"[:300]
    elif (result.verdict is Verdict.RUNTIME_ERROR and result.failure is not None
          and describes_device_fault(result.failure.message)):
        integrity.device_fault = f"case {case.case_id}: {result.failure.message}"[:300]


def _result(
    task: Task,
    case: Case,
    dtype: torch.dtype,
    inputs: Sequence[Any],
    verdict: Verdict,
    error: ErrorMetrics | None,
    timing: Timing | None,
) -> CaseResult:
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
    integrity: RunIntegrity | None = None,
) -> CaseResult:
    """Gates 2-7, then measurement. Candidate faults become verdicts; our own faults become infra_error."""
    ran = _gate_case(task, case, dtype, loaded, campaign, device, events, integrity or RunIntegrity(), False)
    assert isinstance(ran, CaseResult)
    return ran


def _gate_case(task: Task, case: Case, dtype: torch.dtype, loaded: LoadedCandidate, campaign: Campaign,
               device: torch.device, events: PipelineEvents, integrity: RunIntegrity,
               defer: bool) -> CaseResult | _Deferred:
    """run_case; with `defer`, a case that passed its gates comes back as a _Deferred whose run() measures it."""
    seed = input_seed(campaign, task, dtype, case)
    inputs: Sequence[Any] = []
    evidence = Integrity(own_launches=0, policy=integrity.policy)
    settings = get_settings()
    late_write_ms = settings.integrity_dependent_launch_delay_ms if settings.integrity_dependent_launch_probe \
        else None
    gates = CaseGates(task, case, dtype, loaded, device, integrity.guard, evidence, late_write_ms)
    try:
        inputs = task.make_inputs(case, dtype, device, torch.Generator().manual_seed(seed))
        events.phase("compile", case.case_id)
        gates.run(inputs, seed, events)
    except CandidateFailure as failure:
        return _failed(task, case, dtype, inputs, failure, gates.metrics, evidence)
    except Exception as exc:  # our code failed (oracle, input generation): never the candidate's fault...
        # ...unless the candidate broke something our code relies on.
        tampering = integrity.guard.tampering() if integrity.guard else None
        if tampering is not None:
            return _failed(task, case, dtype, inputs, tampering, gates.metrics, evidence)
        if is_device_fault(exc):  # the candidate's kernels faulted; it surfaced in our next device call
            return _failed(task, case, dtype, inputs, _device_fault("after the candidate's calls", exc),
                           gates.metrics, evidence)
        log.exception("infrastructure fault in case %s/%s", task.name, case.case_id)
        result = _result(task, case, dtype, inputs, Verdict.INFRA_ERROR, gates.metrics, None)
        result.failure = Failure(code=Verdict.INFRA_ERROR, message=f"{type(exc).__name__}: {exc}"[:2000])
        result.integrity = evidence
        return result

    result = _result(task, case, dtype, inputs, Verdict.PASS, gates.metrics, None)
    result.integrity = evidence

    def timed_probe(ring: Sequence[Sequence[Any]], median_us: float, calls: int) -> None:
        evidence.dependent_launch_timed = gates.probe_dependent_launch(ring[-1], median_us,
                                                                       dependent_launch.ahead_sets(ring, calls))

    def measure() -> CaseResult:
        if campaign.measure:
            events.phase("measure", case.case_id)  # exclusive: a sandbox pauses its standby children meanwhile
            try:
                result.timing = measure_case(task, case, dtype, loaded, campaign, device, inputs, integrity,
                                             gates.owned_names, timed_probe if late_write_ms is not None else None)
            except CandidateFailure as failure:
                result.verdict = failure.verdict
                result.failure = Failure(code=failure.verdict, message=failure.message, detail=failure.detail)
            except Exception as exc:
                tampering = integrity.guard.tampering() if integrity.guard else None
                if tampering is not None:
                    return _failed(task, case, dtype, inputs, tampering, gates.metrics, evidence)
                if is_device_fault(exc):  # the candidate's timed calls faulted the device
                    return _failed(task, case, dtype, inputs, _device_fault("while its calls were timed", exc),
                                   gates.metrics, evidence)
                log.exception("measurement fault in case %s/%s", task.name, case.case_id)
                result.verdict = Verdict.INFRA_ERROR
                result.failure = Failure(code=Verdict.INFRA_ERROR,
                                         message=f"measurement: {type(exc).__name__}: {exc}")
        result.reward = _case_reward(result)
        return result

    return _Deferred(case, dtype, measure) if defer and campaign.measure else measure()


def _failed(task: Task, case: Case, dtype: torch.dtype, inputs: Sequence[Any], failure: CandidateFailure,
            metrics: ErrorMetrics | None, evidence: Integrity) -> CaseResult:
    result = _result(task, case, dtype, inputs, failure.verdict, getattr(failure, "metrics", metrics), None)
    result.failure = Failure(code=failure.verdict, message=failure.message, detail=failure.detail)
    result.reward = failed_case_reward()
    result.integrity = evidence
    return result


def _case_reward(result: CaseResult) -> Any:
    if result.verdict is not Verdict.PASS:
        return failed_case_reward() if is_candidate_fault(result.verdict) else None
    t = result.timing
    if t is None or t.kind != "cuda_events":
        return None
    return case_reward(t.baseline.median, t.candidate.median, t.candidate.cv)


def measure_case(
    task: Task,
    case: Case,
    dtype: torch.dtype,
    loaded: LoadedCandidate,
    campaign: Campaign,
    device: torch.device,
    first_inputs: Sequence[Any],
    integrity: RunIntegrity | None = None,
    owned_names: set[str] | None = None,
    timed_probe: Callable[[Sequence[Sequence[Any]], float, int], None] | None = None,
) -> Timing:
    """Time candidate and baseline on the same rotated inputs (see measurement.timing), audited between samples;
    then, on a GPU, `timed_probe(ring, candidate_median_us, calls_per_sample)` (the dependent-launch probe again, in
    place on the ring's last set: gates.CaseGates.probe_dependent_launch), the physical floor and the share of
    foreign kernels in the profiled pass."""
    settings = get_settings()
    integrity = integrity or RunIntegrity()
    min_bytes = task.min_bytes(case, dtype)
    baseline = task.baseline()
    fn = loaded.fn
    guard = integrity.guard
    spec = task.output_spec(case, dtype)
    floor: float | None = None
    if device.type == "cuda":
        sets = ring_input_sets(task, first_inputs, min_bytes, settings)
        n_sets = len(sets)
        # One more set, outside the ring, for the audited calls only (measure_cuda's audit_set).
        audit_set = task.ring_inputs(first_inputs, n_sets) if guard is not None else None
        # Audited samples are drawn from those every run takes: all of a fixed count, the minimum of an adaptive one.
        planned = campaign.samples if campaign.stopping is None else campaign.stopping.min_samples
        auditor = SampleAuditor(task, case, dtype, spec, guard, planned, settings.integrity_audit_samples,
                                settings.integrity_min_call_fraction, integrity.l2) if guard is not None else None
        monitor = ClockMonitor.open(torch.cuda.current_device()) if settings.nvml_sample_clocks \
            else ClockMonitor(note="clock sampling disabled (KERNELPROOF_NVML_SAMPLE_CLOCKS)")
        with monitor as clocks:
            pair = measure_cuda(
                fn, baseline, sets,
                warmups=campaign.warmups, samples=campaign.samples, invocations=campaign.invocations_per_sample,
                l2_flush_bytes=settings.l2_flush_bytes, profiler_invocations=settings.profiler_invocations,
                max_sample_ms=settings.max_sample_ms, auditor=auditor, stopping=campaign.stopping, clocks=clocks,
                throttle_fraction=settings.throttle_clock_fraction,
                launch_inclusive_samples=settings.launch_inclusive_samples, audit_set=audit_set,
                hold_for_host=settings.launch_gate_host_release, cuda_graphs=settings.timing_cuda_graphs,
                ring_audits=settings.timing_ring_audits,
                kept_outputs_max_bytes=settings.timing_kept_outputs_max_bytes,
            )
        if guard is not None:  # the kernel-only pass ran the candidate after the last audited sample: the record
            guard.check()      # the checks below read must not come through a profiler it patched meanwhile
        if timed_probe is not None:  # a candidate that waits only on inputs it has not seen would pass gate 7
            timed_probe(sets, pair.candidate.median, pair.invocations)
        kind = "cuda_events"
        invocations = pair.invocations
        baseline_invocations: int | None = pair.baseline_invocations
        warmups = campaign.warmups
        flush = settings.l2_flush_bytes
        if integrity.copy_gbps is not None:
            floor = time_floor_us(min_bytes, task.flops(case), integrity.copy_gbps)
            check_plausible(pair.candidate.median, floor, min_bytes)
        if pair.candidate_device_us is not None:
            check_timed_region(pair.candidate.median, pair.candidate_device_us)
        if pair.candidate_kernels is not None and guard is not None:
            check_gpu_share(pair.candidate_kernels, (owned_names or set()) | owner_kernel_names(guard.owner))
    else:
        n_sets = 1
        auditor = SampleAuditor(task, case, dtype, spec, guard, campaign.samples, campaign.samples, 1.0) \
            if guard is not None else None
        pair = measure_interpreter(fn, baseline, [first_inputs], campaign.samples, auditor)
        kind, invocations, warmups, flush = "interpreter_wall_clock", 1, 0, 0
        baseline_invocations = 1
    gpu = kind == "cuda_events"
    clocks_seen = pair.clocks or ClockSummary()
    return Timing(
        kind=kind,
        warmups=warmups,
        samples=pair.samples_taken,
        invocations_per_sample=invocations,
        baseline_invocations_per_sample=baseline_invocations,
        input_sets=n_sets,
        l2_flush_bytes=flush,
        candidate=pair.candidate,
        baseline=pair.baseline,
        candidate_device_us=pair.candidate_device_us,
        baseline_device_us=pair.baseline_device_us,
        device_time_source=pair.device_time_source,
        reward_input=REWARD_INPUT_CUDA if gpu else "none: interpreter timings never feed a reward",
        speedup=pair.baseline.median / pair.candidate.median if pair.candidate.median > 0 else 0.0,
        min_bytes=min_bytes,
        note=pair.note,
        audited_samples=pair.audited_samples,
        sync_gap_us=pair.sync_gap_us,
        time_floor_us=floor,
        stopped_by=pair.stopped_by,
        target_rse=campaign.stopping.target_rse if gpu and campaign.stopping is not None else None,
        candidate_rse=pair.candidate_rse,
        baseline_rse=pair.baseline_rse,
        throttled_samples=clocks_seen.throttled_samples,
        sm_clock_mhz_min=clocks_seen.sm_clock_mhz_min,
        sm_clock_mhz_max=clocks_seen.sm_clock_mhz_max,
        sm_clock_mhz_start=clocks_seen.sm_clock_mhz_start,
        mem_clock_mhz_start=clocks_seen.mem_clock_mhz_start,
        temperature_c_start=clocks_seen.temperature_c_start,
        candidate_launch_inclusive=pair.candidate_launch_inclusive,
        baseline_launch_inclusive=pair.baseline_launch_inclusive,
        candidate_host_us_per_call=pair.candidate_host_us,
        baseline_host_us_per_call=pair.baseline_host_us,
        launch_exposed_samples=pair.exposed_samples if gpu else None,
        launch_gate=pair.launch_gate if gpu else None,
        sample_launch=pair.sample_launch if gpu else None,
        deferred_samples=pair.deferred_samples if gpu else None,
        **speed_of_light(min_bytes, pair.candidate.median if gpu else None, pair.candidate_device_us,
                         integrity.copy_gbps if gpu else None,
                         pair.candidate_launch_inclusive.median if pair.candidate_launch_inclusive else None),
    )


__all__ = ["CandidateOutcome", "CaseSet", "PipelineEvents", "derive_seed", "verify_candidate"]
