"""Correctness gates 2-6 for one case. Each gate raises CandidateFailure with its verdict; the first failure ends the
case and no timing is taken.

Order (METHODOLOGY.md explains each):
  2. run on fresh inputs before this case's oracle exists, into poisoned memory; check the output contract and that
     inputs are unchanged
  3. non-finite output where the oracle is finite
  4. tolerance (elementwise and magnitude-aware)
  5. exact replay on copies of the same inputs
  6. fresh-data recheck on new random inputs
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch

from kernelproof_core.candidate import short_traceback
from kernelproof_core.errors import CandidateFailure
from kernelproof_core.metrics import describe_failure, error_metrics, within_tolerance
from kernelproof_core.report.models import ErrorMetrics
from kernelproof_core.tasks.base import OutputSpec
from kernelproof_core.tolerances import TolerancePolicy
from kernelproof_core.verdicts import Verdict

Fn = Callable[..., Any]
POISON_BYTES_MAX = 4 * 1024**3


def call_candidate(fn: Fn, inputs: Sequence[Any], device: torch.device) -> Any:
    """Call the candidate and wait for its work; exceptions become typed verdicts."""
    try:
        out = fn(*inputs)
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        return out
    except torch.OutOfMemoryError as exc:
        raise CandidateFailure(Verdict.RESOURCE_LIMIT, f"out of device memory: {exc}"[:500]) from None
    except Exception as exc:
        verdict = Verdict.COMPILE_ERROR if _is_triton_compile_error(exc) else Verdict.RUNTIME_ERROR
        raise CandidateFailure(verdict, f"{type(exc).__name__}: {exc}"[:2000], short_traceback(exc)) from None


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
    """A plain torch.Tensor (not a subclass), on the inputs' device, of the documented shape and dtype."""
    if type(out) is not torch.Tensor:
        raise CandidateFailure(Verdict.WRONG_OUTPUT_TYPE, f"returned {type(out).__module__}.{type(out).__qualname__}")
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


def bitwise_equal(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Bit-for-bit equality (NaN payloads included), independent of strides."""
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    int_dtype = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[a.element_size()]
    return bool(torch.equal(a.contiguous().view(int_dtype), b.contiguous().view(int_dtype)))


def check_inputs_unchanged(inputs: Sequence[Any], originals: Sequence[Any]) -> None:
    for i, (now, before) in enumerate(zip(inputs, originals, strict=True)):
        if isinstance(now, torch.Tensor) and not bitwise_equal(now, before):
            raise CandidateFailure(Verdict.INPUT_MUTATED, f"input #{i} was modified by the candidate")


def check_finite(out: torch.Tensor, reference: torch.Tensor) -> None:
    bad = ~torch.isfinite(out) & torch.isfinite(reference)
    if bool(bad.any()):
        count = int(bad.sum().item())
        first = [int(i) for i in torch.nonzero(bad)[0].tolist()]
        raise CandidateFailure(
            Verdict.NON_FINITE, f"{count} non-finite values where the oracle is finite; first at {first}"
        )


def check_tolerance(out: torch.Tensor, reference: torch.Tensor, policy: TolerancePolicy) -> ErrorMetrics:
    metrics = error_metrics(out, reference, policy)
    if not within_tolerance(metrics, policy):
        failure = CandidateFailure(Verdict.TOLERANCE, describe_failure(metrics, policy))
        failure.metrics = metrics  # type: ignore[attr-defined]
        raise failure
    return metrics


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
