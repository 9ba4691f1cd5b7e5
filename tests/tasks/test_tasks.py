"""Task definitions and built-in candidates: interpreted on a CPU host, compiled on a GPU host.

For every task, dtype and case of the INTERPRETER set, the shipped Triton candidate must meet the task's
tolerance policy against its oracle, as the pipeline's numeric gate judges it (elementwise atol/rtol AND
relative L2). The eager baselines are held to the same bar: that is a sanity check of the oracles and
tolerances (a policy that a native-dtype PyTorch op cannot meet would be wrong), not a claim about them.
"""

from __future__ import annotations

import functools
import types
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import torch

from kernelproof_core.candidate import load_candidate
from kernelproof_core.interpreter import enable_interpreter
from kernelproof_core.metrics import describe_failure, error_metrics, within_tolerance
from kernelproof_core.tasks import TASKS, Case, CaseKind, CaseSet, Task
from kernelproof_core.tolerances import TolerancePolicy

HAS_CUDA = torch.cuda.is_available()
if not HAS_CUDA:
    # Triton reads this in every @triton.jit, and the built-ins are loaded (their kernels decorated) only
    # inside the tests, so setting it here is early enough. Only without a GPU: on a GPU host it would switch
    # the whole pytest process (the GPU suite too) to the interpreter; there these tests run compiled.
    enable_interpreter()

# swiglu/large_values drives exp(-gate) to inf on purpose; the interpreter's NumPy reports that.
pytestmark = pytest.mark.filterwarnings("ignore:overflow encountered in exp:RuntimeWarning")

SEED = 20240611
DTYPES = (torch.bfloat16, torch.float16, torch.float32)
DEVICE = torch.device("cuda" if HAS_CUDA else "cpu")
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
    return task.make_inputs(case, dtype, DEVICE, torch.Generator().manual_seed(SEED))


def assert_within(out: torch.Tensor, ref: torch.Tensor, policy: TolerancePolicy, label: str) -> None:
    """The pipeline's own numeric gate: every element within atol + rtol*|ref|, and relative L2 in bounds."""
    assert out.shape == ref.shape, f"{label}: shape {tuple(out.shape)} != {tuple(ref.shape)}"
    metrics = error_metrics(out, ref, policy)
    assert within_tolerance(metrics, policy), f"{label}: {describe_failure(metrics, policy)}"


@pytest.mark.parametrize(("task_name", "case", "dtype"), list(_interpreter_params()))
def test_builtin_candidate_meets_tolerance(task_name: str, case: Case, dtype: torch.dtype) -> None:
    task = TASKS[task_name]
    inputs = _inputs(task, case, dtype)
    before = [t.clone() for t in inputs if isinstance(t, torch.Tensor)]
    out = _builtin(task_name)(*inputs)
    spec = task.output_spec(case, dtype)
    assert tuple(out.shape) == spec.shape and out.dtype == spec.dtype
    assert out.is_contiguous(), "built-ins promise a fresh contiguous output"
    tensors = [t for t in inputs if isinstance(t, torch.Tensor)]
    assert all(out.data_ptr() != t.data_ptr() for t in tensors)
    assert all(torch.equal(a, b) for a, b in zip(before, tensors, strict=True)), "inputs were modified"
    assert_within(out, task.oracle(inputs), task.tolerance(dtype), f"{task_name}/{case.case_id}/{dtype}")
    if dtype is torch.bfloat16:  # fixed reduction order, no atomics: a second call is bit-identical
        assert torch.equal(_builtin(task_name)(*inputs), out), "output is not deterministic"


@pytest.mark.parametrize(("task_name", "case", "dtype"), list(_interpreter_params()))
def test_baseline_meets_tolerance(task_name: str, case: Case, dtype: torch.dtype) -> None:
    """Sanity check of oracle and policy: native-dtype eager PyTorch must pass the gate it is held to."""
    task = TASKS[task_name]
    inputs = _inputs(task, case, dtype)
    out = task.baseline()(*inputs)
    label = f"baseline {task_name}/{case.case_id}/{dtype}"
    assert_within(out, task.oracle(inputs), task.tolerance(dtype), label)


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
    case = Case("t", CaseKind.EDGE, {"M": 5, "N": 9}, "", distribution="constant")
    (x,) = _inputs(task, case, torch.float16)
    assert (x == x[:, :1]).all()


# Paths of the built-ins that the interpreter case set does not reach (they need wide rows or many rows).


def _forced(task_name: str, sms: int, **constants: int) -> Callable[..., Any]:
    """A fresh copy of a built-in whose grid sizing believes the device has `sms` SMs (and those module constants)."""
    module = _load_module(TASKS[task_name])
    module.__dict__["_num_sms"] = lambda device: sms
    for name, value in constants.items():
        assert name in module.__dict__, name
        module.__dict__[name] = value
    fn: Callable[..., Any] = module.candidate
    return fn


# (M, N, row pad, SMs, module constants): which wide-row path the built-in takes.
_SOFTMAX_WIDE: dict[str, tuple[int, int, int, int, dict[str, int]]] = {
    "one_batch": (2, 40000, 8, 132, {}),  # every row in one batch: partials, then normalise
    "batches": (5, 33001, 0, 132, {"_STAGED_BATCH_BYTES": 70000}),  # unaligned rows, 2 rows per batch, 3 batches
    "many_chunks": (3, 40000, 8, 132, {"_STAGED_CHUNK_BYTES": 1024, "_STAGED_BATCH_BYTES": 1}),  # a batch a row
    # three chunks per program, the last part ragged (40000 bf16 = 78.1 chunks of 512)
    "multi_chunk_programs": (3, 40000, 8, 132, {"_STAGED_CHUNK_BYTES": 1024, "_STAGED_CHUNKS": 3}),
    # 16384 < N <= 32768: the persistent realigned path, walking and prefetching rows (5 rows on 2 "SMs" x 2, 3 on
    # 1). Padded rows, unaligned (stride 20009), odd padding (20013) and aligned; the pipelined path where an
    # unaligned window would double (32767)
    "realigned_padded_unaligned": (5, 20001, 8, 2, {}),
    "realigned_padded_odd": (5, 20000, 13, 2, {}),
    "realigned_padded": (3, 32768, 8, 1, {}),
    "pipelined": (5, 32767, 5, 2, {}),
    # contiguous rows at odd, even, 4-aligned and 8-aligned widths; the last row's last vector ends past the tensor
    # (its part is in the edge tile)
    "realigned_odd": (5, 20001, 0, 2, {}),
    "realigned_even": (3, 16418, 0, 1, {}),
    "realigned_by4": (3, 16396, 0, 132, {}),
    "realigned_aligned": (3, 32768, 0, 1, {}),
    "realigned_one_row": (1, 16965, 0, 132, {}),  # M = 1: compiled, Triton makes M the constant 1
    # unaligned 16-bit rows of 2049-16384 (8 programs per "SM"): contiguous, padded by a whole vector
    "realigned_narrow": (21, 3001, 0, 2, {}),
    "realigned_narrow_padded": (5, 5207, 8, 1, {}),
}
_RMS_NORM_WIDE: dict[str, tuple[int, int, int, int, dict[str, int]]] = {
    "looped": (2, 40000, 8, 132, {}),  # aligned bf16/fp16 rows wider than 32768
    "unaligned": (2, 20001, 0, 132, {}),  # unaligned (and FP32) rows go wide above 16384
    "persistent": (3, 40000, 8, 1, {"_L2_BUDGET_BYTES": 1}),
}


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("path", list(_SOFTMAX_WIDE))
def test_softmax_wide_row_paths(dtype: torch.dtype, path: str) -> None:
    """The staged N > 32768 path in one batch, in several, and with many chunks per row, and the pipelined path for
    16384 < N <= 32768, with -inf entries (a chunk can be all -inf) and odd widths."""
    m, n, pad, sms, constants = _SOFTMAX_WIDE[path]
    task = TASKS["softmax"]
    case = Case("wide", CaseKind.EDGE, {"M": m, "N": n}, "", distribution="neg_inf", row_stride_pad=pad)
    inputs = _inputs(task, case, dtype)
    out = _forced("softmax", sms, **constants)(*inputs)
    assert_within(out, task.oracle(inputs), task.tolerance(dtype), f"softmax {path} {dtype}")


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("path", list(_RMS_NORM_WIDE))
def test_rms_norm_wide_row_paths(dtype: torch.dtype, path: str) -> None:
    """Rows too wide for registers loop over chunks, one program per row or persistent over rows."""
    m, n, pad, sms, constants = _RMS_NORM_WIDE[path]
    task = TASKS["rms_norm"]
    case = Case("wide", CaseKind.EDGE, {"M": m, "N": n}, "", row_stride_pad=pad)
    inputs = _inputs(task, case, dtype)
    out = _forced("rms_norm", sms, **constants)(*inputs)
    assert_within(out, task.oracle(inputs), task.tolerance(dtype), f"rms_norm {path} {dtype}")


@pytest.mark.parametrize("dtype", DTYPES)
def test_swiglu_reads_halves_of_a_fused_projection(dtype: torch.dtype) -> None:
    """gate and up as the two halves of one [M, 2N] buffer: row stride 2N, no copies needed."""
    task = TASKS["swiglu"]
    fused = torch.randn((5, 2 * 3000), generator=torch.Generator().manual_seed(SEED)).to(dtype).to(DEVICE)
    gate, up = fused.chunk(2, dim=1)
    assert gate.stride() == (6000, 1)
    out = _builtin("swiglu")(gate, up)
    assert_within(out, task.oracle((gate, up)), task.tolerance(dtype), "fused halves")



@pytest.mark.parametrize("task_name", sorted(TASKS))
def test_ring_inputs_are_new_device_copies_of_the_same_layout(task_name: str) -> None:
    """Timing-ring sets: same shapes, strides and dtypes, new storage, other contents, same rows (rolled)."""
    task = TASKS[task_name]
    case = Case("ring", CaseKind.EDGE, {"M": 6, "N": 40}, "", distribution="neg_inf" if task_name == "softmax"
                else "normal", row_stride_pad=3)
    first = task.make_inputs(case, torch.float32, torch.device("cpu"), torch.Generator().manual_seed(1))
    sets = [task.ring_inputs(first, i) for i in range(1, 5)]
    for ring in sets:
        assert len(ring) == len(first)
        for a, b in zip(first, ring, strict=True):
            if not isinstance(a, torch.Tensor):
                assert a == b
                continue
            assert (b.shape, b.stride(), b.dtype) == (a.shape, a.stride(), a.dtype)
            assert b.data_ptr() != a.data_ptr()
            assert not torch.equal(a, b)
            rows = sorted(map(tuple, a.reshape(a.shape[0], -1).tolist()))
            assert sorted(map(tuple, b.reshape(b.shape[0], -1).tolist())) == rows  # rolled, not redrawn
    x_sets = [ring[0] for ring in sets]
    assert all(not torch.equal(p, q) for i, p in enumerate(x_sets) for q in x_sets[i + 1:])


def test_ring_input_sets_cover_the_ring_budget_within_its_caps() -> None:
    """measurement.timing.ring_input_sets: the case's own inputs first, then ring variants, as many as the settings'
    ring budget asks for (enough to exceed its bytes, within the set and memory caps)."""
    from kernelproof_core.measurement.timing import ring_input_sets
    from kernelproof_core.settings import Settings

    task = TASKS["rms_norm"]
    case = Case("ring", CaseKind.EDGE, {"M": 4, "N": 64}, "")
    first = task.make_inputs(case, torch.float32, torch.device("cpu"), torch.Generator().manual_seed(2))
    case_bytes = task.min_bytes(case, torch.float32)
    for min_bytes, max_sets, expected in ((5 * case_bytes, 64, 5), (5 * case_bytes, 3, 3), (1, 64, 1)):
        settings = Settings(input_ring_min_bytes=min_bytes, input_ring_max_sets=max_sets)
        sets = ring_input_sets(task, first, case_bytes, settings)
        assert len(sets) == expected and sets[0] is first
        assert len({s[0].data_ptr() for s in sets}) == expected  # each set its own memory
