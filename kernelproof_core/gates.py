"""Correctness gates 2-7 for one case. Each gate raises CandidateFailure with its verdict; the first failure ends the
case and no timing is taken.

Order (METHODOLOGY.md explains each):
  2. run on fresh inputs before this case's oracle exists, into poisoned memory, observed (integrity.guard); check
     the output contract (a plain tensor with its own storage) and that inputs are unchanged; at least one launch
     of the candidate's own kernels
  3. non-finite output where the oracle is finite
  4. tolerance (elementwise, magnitude-aware and, for 16-bit outputs, within one ulp), then proof of work
  5. exact replay on copies of the same inputs, in new memory
  6. fresh-data recheck on new random inputs
  7. (GPU, sm_90 on, when the setting asks for it) the dependent-launch probe: the inputs written by the kernel just
     before the candidate, which lets dependents start early (integrity.dependent_launch, `stale_input`)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch

from kernelproof_core.candidate import LoadedCandidate, short_traceback
from kernelproof_core.errors import CandidateFailure
from kernelproof_core.integrity import dependent_launch
from kernelproof_core.integrity.guard import CallGuard, Watch, bitwise_equal
from kernelproof_core.integrity.precision import check_precision
from kernelproof_core.integrity.profiled import with_profile_retries
from kernelproof_core.integrity.proof import check_gpu_share, check_launched, check_proof_of_work, foreign_share
from kernelproof_core.metrics import describe_failure, error_metrics, within_tolerance
from kernelproof_core.report.models import ErrorMetrics, Integrity
from kernelproof_core.tasks.base import Case, OutputSpec, Task
from kernelproof_core.tolerances import TolerancePolicy
from kernelproof_core.verdicts import Verdict

Fn = Callable[..., Any]
POISON_BYTES_MAX = 4 * 1024**3


def call_candidate(fn: Fn, inputs: Sequence[Any], device: torch.device) -> Any:
    """Call the candidate and wait for its work; exceptions become typed verdicts."""
    out = _typed_call(fn, inputs)
    if device.type == "cuda":
        _typed_call(torch.cuda.synchronize, (device,))
    return out


def _typed_call(fn: Fn, args: Sequence[Any]) -> Any:
    """Candidate code (or a wait on its work); what it raises becomes the candidate's typed verdict."""
    try:
        return fn(*args)
    except CandidateFailure:
        raise
    except torch.OutOfMemoryError as exc:
        raise CandidateFailure(Verdict.RESOURCE_LIMIT, f"out of device memory: {exc}"[:500]) from None
    except Exception as exc:
        verdict = Verdict.COMPILE_ERROR if _is_triton_compile_error(exc) else Verdict.RUNTIME_ERROR
        raise CandidateFailure(verdict, f"{type(exc).__name__}: {exc}"[:2000], short_traceback(exc)) from None


def call_guarded(
    fn: Fn, inputs: Sequence[Any], device: torch.device, guard: CallGuard | None, profile: bool = False
) -> tuple[Any, Watch | None]:
    """`call_candidate` observed by the guard: launches, torch ops, tampering, threads, deferred writes. Only the
    candidate's own exceptions become its verdicts; a fault in the guard stays ours (infra_error)."""
    if guard is None:
        return call_candidate(fn, inputs, device), None
    with guard.watch(profile=profile) as watch:
        watch.out = _typed_call(fn, inputs)
    return watch.out, watch


def _is_triton_compile_error(exc: BaseException) -> bool:
    try:
        from triton.compiler.errors import CompilationError
    except ImportError:  # pragma: no cover - triton always ships it
        return False
    return isinstance(exc, CompilationError)


def poison_allocator(device: torch.device, nbytes: int) -> None:
    """Leave NaN-filled blocks in the CUDA caching allocator so that memory the candidate allocates without writing
    holds NaN rather than anything a previous computation left behind."""
    if device.type != "cuda" or nbytes <= 0:
        return
    n = min(nbytes, POISON_BYTES_MAX) // 4 + 1
    blocks = [torch.full((n,), float("nan"), dtype=torch.float32, device=device) for _ in range(2)]
    del blocks


def check_output_contract(out: Any, spec: OutputSpec, device: torch.device) -> torch.Tensor:
    """A plain torch.Tensor (not a subclass, no instance attributes), on the inputs' device, of the documented shape
    and dtype. Instance attributes on a tensor (`y.double = ...`) would run candidate code inside the checker."""
    if type(out) is not torch.Tensor:
        raise CandidateFailure(Verdict.WRONG_OUTPUT_TYPE, f"returned {type(out).__module__}.{type(out).__qualname__}")
    if vars(out):
        raise CandidateFailure(Verdict.WRONG_OUTPUT_TYPE,
                               f"returned a tensor carrying instance attributes {sorted(vars(out))[:5]}")
    if out.device.type != device.type:
        raise CandidateFailure(Verdict.DEVICE_MISMATCH, f"output on {out.device}, inputs on {device}")
    if tuple(out.shape) != spec.shape:
        raise CandidateFailure(Verdict.SHAPE_MISMATCH, f"output shape {tuple(out.shape)}, expected {spec.shape}")
    if out.dtype != spec.dtype:
        raise CandidateFailure(Verdict.DTYPE_MISMATCH, f"output dtype {out.dtype}, expected {spec.dtype}")
    return out


def snapshot(inputs: Sequence[Any]) -> list[Any]:
    """Copies of the inputs (same values and strides) for the mutation check and the replay."""
    return [_copy_like(x) if isinstance(x, torch.Tensor) else x for x in inputs]


def _copy_like(t: torch.Tensor) -> torch.Tensor:
    out = torch.empty_strided(t.size(), t.stride(), dtype=t.dtype, device=t.device)
    out.copy_(t)
    return out


def check_inputs_unchanged(inputs: Sequence[Any], originals: Sequence[Any]) -> None:
    for i, (now, before) in enumerate(zip(inputs, originals, strict=True)):
        if isinstance(now, torch.Tensor) and not bitwise_equal(now, before):
            raise CandidateFailure(Verdict.INPUT_MUTATED, f"input #{i} was modified by the candidate")


def _storage_span(t: torch.Tensor) -> tuple[int, int]:
    storage = t.untyped_storage()
    return storage.data_ptr(), storage.data_ptr() + storage.nbytes()


def _overlaps(a: torch.Tensor, b: torch.Tensor) -> bool:
    (a0, a1), (b0, b1) = _storage_span(a), _storage_span(b)
    return a.device == b.device and a0 < b1 and b0 < a1


def check_owns_storage(out: torch.Tensor, inputs: Sequence[Any]) -> None:
    """The output has its own memory: a view of an input is not a result."""
    for i, x in enumerate(inputs):
        if isinstance(x, torch.Tensor) and _overlaps(out, x):
            raise CandidateFailure(Verdict.WRONG_OUTPUT_TYPE,
                                   f"the output shares memory with input #{i}; return a tensor with its own storage")


def check_not_aliased(out: torch.Tensor, earlier: Sequence[torch.Tensor]) -> None:
    """A call's output must not be the buffer an earlier call returned (still held by the verifier): results that
    change after they were returned cannot be checked, and reusing one buffer is caching by construction."""
    for prev in earlier:
        if _overlaps(out, prev):
            raise CandidateFailure(Verdict.CACHED_OUTPUT,
                                   "the output is the same memory an earlier call returned (a cached buffer)")


def check_finite(out: torch.Tensor, reference: torch.Tensor) -> None:
    bad = ~torch.isfinite(out) & torch.isfinite(reference)
    if bool(bad.any()):
        count = int(bad.sum().item())
        first = [int(i) for i in torch.nonzero(bad)[0].tolist()]
        raise CandidateFailure(
            Verdict.NON_FINITE, f"{count} non-finite values where the oracle is finite; first at {first}"
        )


def check_tolerance(out: torch.Tensor, reference: torch.Tensor, policy: TolerancePolicy) -> ErrorMetrics:
    """Elementwise and relative-L2 tolerance, then (16-bit outputs) the one-ulp precision check."""
    metrics = error_metrics(out, reference, policy)
    if not within_tolerance(metrics, policy):
        failure = CandidateFailure(Verdict.TOLERANCE, describe_failure(metrics, policy))
        failure.metrics = metrics  # type: ignore[attr-defined]
        raise failure
    try:
        share = check_precision(out, reference, policy)
    except CandidateFailure as failure:
        failure.metrics = metrics  # type: ignore[attr-defined]
        raise
    return metrics.model_copy(update={"beyond_1ulp_fraction": share})


def check_replay(first: torch.Tensor, replay: torch.Tensor) -> None:
    if not bitwise_equal(first, replay):
        differing = int((first != replay).sum().item())
        raise CandidateFailure(
            Verdict.NONDETERMINISTIC, f"replay on identical inputs differs in {differing} elements (bitwise)"
        )


def check_fresh(
    first_out: torch.Tensor,
    first_ref: torch.Tensor,
    fresh_out: torch.Tensor,
    fresh_ref: torch.Tensor,
    policy: TolerancePolicy,
) -> None:
    """New inputs must give new, correct output. Returning the previous output for different inputs, or output that
    is wrong only on data the candidate has not seen before, is output caching."""
    if bitwise_equal(first_out, fresh_out) and not torch.equal(first_ref, fresh_ref):
        raise CandidateFailure(Verdict.CACHED_OUTPUT, "fresh inputs returned the previous output unchanged")
    metrics = error_metrics(fresh_out, fresh_ref, policy)
    if not within_tolerance(metrics, policy):
        raise CandidateFailure(
            Verdict.CACHED_OUTPUT,
            "correct on the first inputs but wrong on fresh ones: " + describe_failure(metrics, policy),
        )


class CaseGates:
    """Gates 2-7 of one case (kernelproof_core/gates.py, docs/METHODOLOGY.md), each candidate call observed.
    `late_write_ms`: the dependent-launch probe's delay (gate 7), None to leave the probe off."""

    def __init__(self, task: Task, case: Case, dtype: torch.dtype, loaded: LoadedCandidate, device: torch.device,
                 guard: CallGuard | None, evidence: Integrity, late_write_ms: float | None = None) -> None:
        self.task, self.case, self.dtype, self.loaded, self.device = task, case, dtype, loaded, device
        self.guard, self.evidence, self.late_write_ms = guard, evidence, late_write_ms
        self.spec = task.output_spec(case, dtype)
        self.policy = task.tolerance(dtype)
        self.metrics: ErrorMetrics | None = None
        self.owned_names: set[str] = set()

    def call(self, inputs: Sequence[Any], profile: bool = False) -> tuple[torch.Tensor, Watch | None]:
        """One observed call: output contract, inputs unchanged, the output in its own storage."""
        originals = snapshot(inputs)
        out, watch = call_guarded(self.loaded.fn, inputs, self.device, self.guard, profile=profile)
        out = check_output_contract(out, self.spec, self.device)
        check_inputs_unchanged(inputs, originals)
        check_owns_storage(out, inputs)
        if watch is not None and watch.log is not None:
            self.owned_names |= watch.log.owned_names
        return out, watch

    def replay_call(self, inputs: Sequence[Any], profile: bool) -> tuple[torch.Tensor, Watch | None]:
        """The replay, profiled on a GPU; where CUPTI's record lost a harness canary (ProfilerGap) the call is made
        again after a pause or two (profiled.with_profile_retries), then the gap is the infrastructure's fault."""
        return with_profile_retries(lambda: self.call(inputs, profile=profile), f"case {self.case.case_id}")

    def prove(self, out: torch.Tensor, watch: Watch | None, inputs: Sequence[Any]) -> None:
        if watch is not None and watch.log is not None:
            check_proof_of_work(watch.log, watch.trace, out, inputs)
            if watch.kernel_us is not None:
                self.evidence.foreign_gpu_share = foreign_share(watch.kernel_us, watch.log.owned_names)
                check_gpu_share(watch.kernel_us, watch.log.owned_names)

    def run(self, inputs: Sequence[Any], seed: int, events: Any) -> None:
        """Gates 2-7 in order; `events` gets the execute phase once the first (compiling) call returned. The first
        call must launch an own kernel at once (a no-op is caught before the oracle exists); the full proof of work
        of each call follows its numeric checks, so a wrong or stale output gets the more specific verdict."""
        task, policy, cuda = self.task, self.policy, self.device.type == "cuda"
        originals = snapshot(inputs)
        # Gate 2: the candidate runs before this case's oracle exists, into poisoned allocator memory.
        poison_allocator(self.device, int(torch.Size(self.spec.shape).numel()) * self.spec_itemsize())
        out, first = self.call(inputs)
        events.phase("execute", self.case.case_id)
        if first is not None and first.log is not None:
            check_launched(first.log)
            self.evidence.own_launches = first.log.own_launches
            self.evidence.kernels = sorted(self.owned_names & ({launch.kernel for launch in first.log.launches}
                                                               | {name for name, _ in first.log.hooked}))
        reference = task.oracle(inputs)
        check_finite(out, reference)  # gate 3
        self.metrics = check_tolerance(out, reference, policy)  # gate 4 (precision included)
        self.prove(out, first, inputs)
        replay_inputs = snapshot(originals)
        replay, second = self.replay_call(replay_inputs, profile=cuda)  # gate 5, GPU time per kernel (CUPTI)
        check_not_aliased(replay, [out])
        check_replay(out, replay)
        fresh_seed = torch.Generator().manual_seed(seed ^ 0x5EED)
        fresh_inputs = task.make_inputs(self.case, self.dtype, self.device, fresh_seed)
        fresh_out, third = self.call(fresh_inputs)  # gate 6
        check_not_aliased(fresh_out, [out, replay])
        fresh_reference = task.oracle(fresh_inputs)
        check_finite(fresh_out, fresh_reference)
        check_fresh(out, reference, fresh_out, fresh_reference, policy)
        self.prove(replay, second, replay_inputs)
        self.prove(fresh_out, third, fresh_inputs)
        self.evidence.dependent_launch = self.probe_dependent_launch(originals)  # gate 7

    def probe_dependent_launch(self, inputs: Sequence[Any], timed_median_us: float | None = None,
                               before: Sequence[Sequence[Any]] = ()) -> dependent_launch.DependentLaunchProbe:
        """Gate 7: correct output when the kernel just before the candidate writes its inputs and lets dependents
        start early. The observed call takes no snapshot first: nothing may come between the writer and the
        candidate's launch on the stream. With `timed_median_us` (after the timed samples): in place on `inputs`, a
        ring set the timed calls used, the writer's delay from that median (dependent_launch.timed_delay_ms), the
        graph calling the candidate on each set of `before` first (dependent_launch.ahead_sets)."""
        if self.late_write_ms is None:
            return "off"
        if not dependent_launch.supported(self.device):
            return "unsupported"

        def observed(given: Sequence[Any]) -> Any:
            return call_guarded(self.loaded.fn, given, self.device, self.guard)[0]

        def problem(out: Any, truth: Sequence[Any], given: Sequence[Any]) -> str | None:
            out = check_output_contract(out, self.spec, self.device)
            check_inputs_unchanged(given, truth)
            reference = self.task.oracle(truth)
            try:
                check_finite(out, reference)
                check_tolerance(out, reference, self.policy)
            except CandidateFailure as failure:  # what gates 3 and 4 would say, as this gate's verdict
                return failure.message
            return None

        if timed_median_us is None:  # gate 7: fresh copies, the setting's delay
            delay_ms, in_place = self.late_write_ms, False
        else:  # after the timed samples: in place on a ring set
            delay_ms, in_place = dependent_launch.timed_delay_ms(timed_median_us, self.late_write_ms), True
        return dependent_launch.probe(observed, lambda given: self.loaded.fn(*given), inputs, problem, delay_ms,
                                      in_place=in_place, before=before)

    def spec_itemsize(self) -> int:
        return torch.empty((), dtype=self.spec.dtype).element_size()
