"""Every correctness gate and its verdict, with real Triton kernels (interpreter on CPU, compiled on a GPU)."""

from __future__ import annotations

import pytest

from kernelproof_core.campaign import Campaign, CandidateJob
from kernelproof_core.pipeline import verify_candidate
from kernelproof_core.tasks import CaseSet
from kernelproof_core.verdicts import Verdict
from tests.candidates.rms_norm_variants import source


def run(src: bytes, device: str, case: str = "tail127", dtype: str = "bfloat16") -> list:
    campaign = Campaign(
        device=device, dtypes=[dtype], case_set=CaseSet.INTERPRETER, case_ids=[case], measure=False  # type: ignore[arg-type]
    )
    return verify_candidate(CandidateJob(task="rms_norm", source=src), campaign).cases


@pytest.mark.parametrize(
    ("variant", "case", "dtype", "expected"),
    [
        ("honest", "tail127", "bfloat16", {Verdict.PASS}),
        ("honest", "strided", "float16", {Verdict.PASS}),
        ("tail_bug", "tail127", "bfloat16", {Verdict.TOLERANCE}),
        ("wrong_dtype", "tail127", "bfloat16", {Verdict.DTYPE_MISMATCH}),
        ("wrong_shape", "tail127", "bfloat16", {Verdict.SHAPE_MISMATCH}),
        ("wrong_type", "tail127", "bfloat16", {Verdict.WRONG_OUTPUT_TYPE}),
        ("wrong_device", "tail127", "bfloat16", {Verdict.DEVICE_MISMATCH}),
        ("nondeterministic", "tail127", "float32", {Verdict.NONDETERMINISTIC}),
        ("input_mutating", "tail127", "bfloat16", {Verdict.INPUT_MUTATED}),
        ("caching", "tail127", "bfloat16", {Verdict.CACHED_OUTPUT}),
        # Never-written memory holds whatever the allocator had: NaN poison on a GPU, garbage or zeros on a CPU.
        ("stale_memory", "n1024", "bfloat16", {Verdict.NON_FINITE, Verdict.TOLERANCE}),
        ("non_finite", "tail127", "bfloat16", {Verdict.NON_FINITE}),
        ("runtime_error", "tail127", "bfloat16", {Verdict.RUNTIME_ERROR}),
    ],
)
def test_variant_verdict(variant: str, case: str, dtype: str, expected: set[Verdict], device: str) -> None:
    (result,) = run(source(variant), device, case, dtype)
    assert result.verdict in expected, (result.verdict, result.failure)
    if result.verdict is Verdict.PASS:
        assert result.failure is None and result.error is not None and result.error.mismatch_count == 0
    else:
        assert result.failure is not None and result.failure.code is result.verdict and result.failure.message
        assert result.reward is not None and result.reward.value == -1.0
        assert result.timing is None  # a failed gate is never timed


def test_tolerance_failure_records_error_metrics(device: str) -> None:
    (result,) = run(source("tail_bug"), device)
    assert result.error is not None
    assert result.error.mismatch_count > 0
    # The short block also shortens the mean, so every row is wrong from its first column.
    assert result.error.first_mismatch_index == [0, 0]
    assert result.error.rel_l2 > 0.1 and result.error.cosine < 0.99


@pytest.mark.parametrize(
    ("src", "expected"),
    [
        (b"\xff\xfe not utf-8", Verdict.INVALID_SOURCE),
        (b"   \n", Verdict.INVALID_SOURCE),
        (b"def candidate(:\n", Verdict.COMPILE_ERROR),
        (b"import kernelproof_no_such_module\n", Verdict.IMPORT_ERROR),
        (b"raise SystemError('module body fails')\n", Verdict.IMPORT_ERROR),
        (b"def candidat(x, w, eps):\n    return x\n", Verdict.MISSING_ENTRYPOINT),
        (b"candidate = 42\n", Verdict.MISSING_ENTRYPOINT),
    ],
)
def test_load_failures_are_typed(src: bytes, expected: Verdict, device: str) -> None:
    results = run(src, device)
    assert [r.verdict for r in results] == [expected]
    assert results[0].failure is not None


def test_oversized_source_is_rejected(device: str) -> None:
    big = b"# " + b"x" * (300 * 1024) + b"\ndef candidate(*a):\n    return None\n"
    (result,) = run(big, device)
    assert result.verdict is Verdict.INVALID_SOURCE
    assert "cap" in result.failure.message  # type: ignore[union-attr]


ZEROS_SOFTMAX = b'''
import torch
import triton
import triton.language as tl


@triton.jit
def _zeros(y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.zeros((BLOCK,), dtype=tl.float32).to(y_ptr.dtype.element_ty), mask=offs < n)


def candidate(x):
    y = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    _zeros[(triton.cdiv(y.numel(), 1024),)](y, y.numel(), BLOCK=1024)
    return y
'''


def test_all_zeros_softmax_fails_even_on_long_rows(device: str) -> None:
    """A kernel that writes zeros: tiny softmax probabilities must not let it through on any row width."""
    campaign = Campaign(device=device, dtypes=["bfloat16"], case_set=CaseSet.INTERPRETER,  # type: ignore[arg-type]
                        case_ids=["tail127", "long_32768", "long_65536"], measure=False)
    results = verify_candidate(CandidateJob(task="softmax", source=ZEROS_SOFTMAX), campaign).cases
    assert [r.case_id for r in results] == ["tail127", "long_32768", "long_65536"]
    assert all(r.verdict is Verdict.TOLERANCE for r in results), [(r.case_id, r.verdict) for r in results]
    assert all(r.error is not None and r.error.rel_l2 == 1.0 for r in results)
