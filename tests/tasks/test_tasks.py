"""Task definitions and built-in candidates, under the Triton interpreter on the CPU.

For every task, dtype and case of the INTERPRETER set, the shipped Triton candidate must meet the task's tolerance
policy against its oracle, exactly as the pipeline's numeric gate would judge it (elementwise atol/rtol AND relative
L2). The eager baselines are held to the same bar: that is a sanity check of the oracles and tolerances (a policy a
native-dtype PyTorch op cannot meet would be wrong), not a claim about the baselines.
"""

from __future__ import annotations

import os

os.environ["TRITON_INTERPRET"] = "1"  # before anything imports triton: the built-ins must run without a GPU

import functools
import types
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import torch

from kernelproof_core.candidate import load_candidate
from kernelproof_core.tasks import TASKS, Case, CaseKind, CaseSet, Task
from kernelproof_core.tolerances import TolerancePolicy

SEED = 20240611
DTYPES = (torch.bfloat16, torch.float16, torch.float32)
CPU = torch.device("cpu")
INTERPRETER_MAX_ELEMENTS = 100_000  # per tensor; the interpreter is ~1e4x slower than a GPU


def _load_module(task: Task) -> types.ModuleType:
    path = task.builtin_candidate
    return load_candidate(path.read_bytes(), str(path)).module


@functools.cache
def _builtin(task_name: str) -> Callable[..., Any]:
    fn: Callable[..., Any] = _load_module(TASKS[task_name]).candidate
    return fn


def _interpreter_params() -> Iterator[Any]:
    for task in TASKS.values():
        for case in task.cases(CaseSet.INTERPRETER, SEED):
            for dtype in DTYPES:
                yield pytest.param(task.name, case, dtype, id=f"{task.name}-{case.case_id}-{str(dtype)[6:]}")


def _inputs(task: Task, case: Case, dtype: torch.dtype) -> tuple[Any, ...]:
    return task.make_inputs(case, dtype, CPU, torch.Generator().manual_seed(SEED))


def assert_within(out: torch.Tensor, ref: torch.Tensor, policy: TolerancePolicy, label: str) -> None:
    """The numeric gate: every element within atol + rtol*|ref|, and relative L2 error within max_rel_l2."""
    assert out.shape == ref.shape, f"{label}: shape {tuple(out.shape)} != {tuple(ref.shape)}"
    err = (out.double() - ref).abs()
    bound = policy.atol + policy.rtol * ref.abs()
    bad = ~(err <= bound)  # NaN in the output counts as bad
    if bad.any():
        i = int(bad.flatten().nonzero()[0])
        raise AssertionError(
            f"{label}: {int(bad.sum())}/{bad.numel()} elements outside atol={policy.atol} rtol={policy.rtol}; "
            f"first at flat index {i}: got {out.flatten()[i].item()!r}, want {ref.flatten()[i].item()!r}"
        )
    rel_l2 = (torch.linalg.vector_norm(out.double() - ref) / torch.linalg.vector_norm(ref).clamp_min(1e-300)).item()
    assert rel_l2 <= policy.max_rel_l2, f"{label}: relative L2 error {rel_l2:.3e} > {policy.max_rel_l2}"


@pytest.mark.parametrize(("task_name", "case", "dtype"), list(_interpreter_params()))
def test_builtin_candidate_meets_tolerance(task_name: str, case: Case, dtype: torch.dtype) -> None:
    task = TASKS[task_name]
    inputs = _inputs(task, case, dtype)
    out = _builtin(task_name)(*inputs)
    spec = task.output_spec(case, dtype)
    assert tuple(out.shape) == spec.shape and out.dtype == spec.dtype
    assert out.is_contiguous(), "built-ins promise a fresh contiguous output"
    assert all(out.data_ptr() != t.data_ptr() for t in inputs if isinstance(t, torch.Tensor))
    assert_within(out, task.oracle(inputs), task.tolerance(dtype), f"{task_name}/{case.case_id}/{dtype}")


@pytest.mark.parametrize(("task_name", "case", "dtype"), list(_interpreter_params()))
def test_baseline_meets_tolerance(task_name: str, case: Case, dtype: torch.dtype) -> None:
    """Sanity check of oracle and policy: native-dtype eager PyTorch must pass the gate it is compared under."""
    task = TASKS[task_name]
    inputs = _inputs(task, case, dtype)
    out = task.baseline()(*inputs)
    assert_within(out, task.oracle(inputs), task.tolerance(dtype), f"baseline {task_name}/{case.case_id}/{dtype}")


@pytest.mark.parametrize("task_name", list(TASKS))
def test_cases_are_deterministic_per_seed(task_name: str) -> None:
    task = TASKS[task_name]
    for case_set in CaseSet:
        assert task.cases(case_set, 7) == task.cases(case_set, 7)
        fixed = [c for c in task.cases(case_set, 7) if c.kind is not CaseKind.RANDOM]
        assert fixed == [c for c in task.cases(case_set, 8) if c.kind is not CaseKind.RANDOM]
        rand_a = [c.dims for c in task.cases(case_set, 7) if c.kind is CaseKind.RANDOM]
        rand_b = [c.dims for c in task.cases(case_set, 8) if c.kind is CaseKind.RANDOM]
        assert rand_a and rand_a != rand_b, "random cases must follow the seed"
        ids = [c.case_id for c in task.cases(case_set, 7)]
        assert len(ids) == len(set(ids)), "case ids must be unique"


@pytest.mark.parametrize("task_name", list(TASKS))
def test_interpreter_set_mirrors_full_set(task_name: str) -> None:
    """Same documented cases, smaller; FULL-only cases are flagged, and the interpreter set stays cheap."""
    task = TASKS[task_name]
    full = {c.case_id: c for c in task.cases(CaseSet.FULL, SEED)}
    interp = {c.case_id: c for c in task.cases(CaseSet.INTERPRETER, SEED)}
    assert set(interp) == {cid for cid, c in full.items() if c.in_interpreter_set}
    for cid, case in interp.items():
        assert case.dims["N"] == full[cid].dims["N"] or case.kind is CaseKind.RANDOM
        assert case.dims["M"] * case.dims["N"] <= INTERPRETER_MAX_ELEMENTS, cid
    assert any(c.kind is CaseKind.THROUGHPUT for c in full.values())


@pytest.mark.parametrize("task_name", list(TASKS))
def test_min_bytes_and_flops_positive(task_name: str) -> None:
    task = TASKS[task_name]
    for case_set in CaseSet:
        for case in task.cases(case_set, SEED):
            for dtype in DTYPES:
                assert task.min_bytes(case, dtype) > 0, case.case_id
            assert task.flops(case) > 0, case.case_id


@pytest.mark.parametrize("task_name", list(TASKS))
def test_make_inputs_is_seeded_and_honours_layout(task_name: str) -> None:
    task = TASKS[task_name]
    for case in task.cases(CaseSet.INTERPRETER, SEED):
        a, b = _inputs(task, case, torch.float32), _inputs(task, case, torch.float32)
        for x, y in zip(a, b, strict=True):
            if isinstance(x, torch.Tensor):
                assert torch.equal(x, y), case.case_id
        first = a[0]
        assert first.stride() == (case.dims["N"] + case.row_stride_pad, 1), case.case_id


def test_softmax_neg_inf_rows_keep_a_finite_entry() -> None:
    task = TASKS["softmax"]
    case = Case("t", CaseKind.EDGE, {"M": 64, "N": 8}, "", distribution="neg_inf", row_stride_pad=3)
    (x,) = _inputs(task, case, torch.bfloat16)
    assert torch.isinf(x).any()
    assert torch.isfinite(x).any(dim=1).all()
    assert x.stride() == (11, 1)


def test_softmax_constant_rows_are_constant() -> None:
    task = TASKS["softmax"]
    (x,) = _inputs(task, Case("t", CaseKind.EDGE, {"M": 5, "N": 9}, "", distribution="constant"), torch.float16)
    assert (x == x[:, :1]).all()


# Paths of the built-ins that the interpreter case set does not reach (they need wide rows or many rows).


def _forced(task_name: str, cpu_sms: int) -> Callable[..., Any]:
    module = _load_module(TASKS[task_name])
    module._CPU_SMS = cpu_sms  # grid sizing pretends the device has this many SMs
    fn: Callable[..., Any] = module.candidate
    return fn


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(("m", "n", "pad", "cpu_sms"), [(2, 40000, 8, 132), (3, 33001, 0, 1), (2, 40000, 8, 1)])
def test_softmax_wide_row_paths(dtype: torch.dtype, m: int, n: int, pad: int, cpu_sms: int) -> None:
    """Split-row path (few rows) and looped online path (rows >= SMs), with -inf entries and odd widths."""
    task = TASKS["softmax"]
    case = Case("wide", CaseKind.EDGE, {"M": m, "N": n}, "", distribution="neg_inf", row_stride_pad=pad)
    inputs = _inputs(task, case, dtype)
    assert_within(_forced("softmax", cpu_sms)(*inputs), task.oracle(inputs), task.tolerance(dtype), f"{case}")


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(("m", "n", "pad"), [(2, 40000, 8), (2, 20001, 0)])
def test_rms_norm_wide_row_path(dtype: torch.dtype, m: int, n: int, pad: int) -> None:
    """Rows too wide for registers loop over chunks (for FP32 and unaligned rows that starts above 16384)."""
    task = TASKS["rms_norm"]
    case = Case("wide", CaseKind.EDGE, {"M": m, "N": n}, "", row_stride_pad=pad)
    inputs = _inputs(task, case, dtype)
    assert_within(_builtin("rms_norm")(*inputs), task.oracle(inputs), task.tolerance(dtype), f"{case}")


@pytest.mark.parametrize("dtype", DTYPES)
def test_swiglu_reads_halves_of_a_fused_projection(dtype: torch.dtype) -> None:
    """gate and up as the two halves of one [M, 2N] buffer: row stride 2N, no copies needed."""
    task = TASKS["swiglu"]
    fused = torch.randn((5, 2 * 3000), generator=torch.Generator().manual_seed(SEED)).to(dtype)
    gate, up = fused.chunk(2, dim=1)
    assert gate.stride() == (6000, 1)
    assert_within(_builtin("swiglu")(gate, up), task.oracle((gate, up)), task.tolerance(dtype), "fused halves")

