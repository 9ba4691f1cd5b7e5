"""Experiment (issue 6, part 3): softmax's split path reading x through FUNNEL, for 16-bit rows of 32769-65536 padded
off the vector grid by an odd number of elements (the campaigns' softmax `hidden_odd` draws: 60-67% of copy on the
H200, the worst case of 64 MB or more; sweep_padded.py's `softmax_padded_wide`).

The planned split (softmax._softmax_split, REALIGNED) cuts each program's chunk from the output's vector window, so
y is written in whole 16-byte vectors, but x's rows start off that grid and, where the padding is odd, it reads x one
element at a time (ALIGN_X = 1): eight 2-byte loads a vector. Here each window vector's run of x is read as the two
aligned 16-byte vectors holding it and funnel-shifted into place (swiglu._funnel_run, planned for swiglu's odd
paddings: 5-8% ahead of element reads on an H100, within 1-3% of the contiguous ceiling). FUNNEL lost on the
realigned kernel holding whole rows (sweep_padded.py, 3_*: 174 registers, the held row's pressure); a split program
holds only its chunk (32 elements a thread at 8 KB on 4 warps), so that cost is not there. Everything after the load
(stats, the row's rendezvous, the store) is the planned split's, so the output is bit for bit the planned split's
(tests/benchmarks/test_split_funnel.py, under the interpreter on one program a row: siblings never meet there).
Family `softmax_split_funnel` (sweep_padded.py) times it beside the plan at the padded wide shapes.
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import partial
from typing import Any

import torch
import triton
import triton.language as tl
from sweep_common import Trial

from kernelproof_core.kernels import softmax, swiglu


@triton.jit
def _meet(count: tl.tensor, n_parts: tl.tensor) -> None:
    # The row's rendezvous, as the planned split's: this program's partials published (release, after a barrier
    # orders every thread's stores), then a wait until all n_parts siblings have published theirs (acquire).
    tl.debug_barrier()
    tl.atomic_add(count, 1, sem="release")
    arrived = tl.atomic_add(count, 0, sem="acquire")
    while arrived < n_parts:
        arrived = tl.atomic_add(count, 0, sem="acquire")
    tl.debug_barrier()


@triton.jit
def _softmax_split_funnel(x_ptr: tl.tensor, y_ptr: tl.tensor, part_ptr: tl.tensor, count_ptr: tl.tensor,
                          M: tl.tensor, N: tl.tensor, stride_x: tl.tensor, off_x: tl.tensor, n_parts: tl.tensor,
                          CHUNK: tl.constexpr, BLOCK_S: tl.constexpr) -> None:
    # x_ptr: x's 16-byte aligned base, x's first element off_x elements into it. A program's chunk: CHUNK window
    # positions of its row (the row at window position `shift`); window vector v of the row reads x from element
    # x0 + v, x0 = off_x + row * stride_x - shift, through _funnel_run; the row's two edge vectors element by element.
    DT: tl.constexpr = y_ptr.dtype.element_ty
    VEC: tl.constexpr = 8
    pid = tl.program_id(0)
    row = pid // n_parts
    part = pid % n_parts
    start = row.to(tl.int64) * N
    base = (start // VEC) * VEC
    shift = (start - base).to(tl.int32)
    x0 = off_x + row.to(tl.int64) * stride_x - shift  # x's element at window position 0
    vecs = part * CHUNK + tl.arange(0, CHUNK // VEC) * VEC
    inside = (vecs >= shift) & (vecs + VEC <= shift + N)  # window vectors wholly inside the row
    x = swiglu._funnel_run(x_ptr.to(tl.pointer_type(tl.int32), bitcast=True), x0 + vecs, DT, inside)
    x = tl.where(inside[:, None], x, float("-inf"))
    e_offs, e_mask = softmax._edges(shift, N, VEC)
    e_mask = e_mask & (e_offs // CHUNK == part)  # the row's edge vectors lying in this chunk
    x_e = tl.load(x_ptr + x0 + e_offs, mask=e_mask, other=float("-inf")).to(tl.float32)
    m_loc = tl.maximum(tl.max(tl.max(x, axis=1), axis=0), tl.max(tl.max(x_e, axis=1), axis=0))
    m_safe = tl.where(m_loc == float("-inf"), 0.0, m_loc)  # an all -inf (or empty) chunk: (max=-inf, sum=0)
    e = tl.exp(x - m_safe)
    e_e = tl.exp(x_e - m_safe)
    at = part_ptr + row.to(tl.int64) * n_parts
    tl.store(at + part, m_loc)
    tl.store(at + M * n_parts + part, tl.sum(tl.sum(e, axis=1), axis=0) + tl.sum(tl.sum(e_e, axis=1), axis=0))
    _meet(count_ptr + row, n_parts)
    slots = tl.arange(0, BLOCK_S)
    m_part = tl.load(at + slots, mask=slots < n_parts, other=float("-inf"), cache_modifier=".cg")
    s_part = tl.load(at + M * n_parts + slots, mask=slots < n_parts, other=0.0, cache_modifier=".cg")
    m = tl.max(m_part, axis=0)
    scale = tl.exp(m_safe - m) / tl.sum(s_part * tl.exp(m_part - m), axis=0)
    offs = vecs[:, None] + tl.arange(0, VEC)[None, :]
    tl.store(y_ptr + base + offs, (e * scale).to(DT), mask=inside[:, None])
    tl.store(y_ptr + base + e_offs, (e_e * scale).to(DT), mask=e_mask)


def run(x: torch.Tensor, y: torch.Tensor, chunk_bytes: int = 0, warps: int = 0) -> tuple[int, Any]:
    """softmax(x) into y (16-bit, rows of any padding) on the FUNNEL split, chunks and warps as the planned realigned
    split's unless given; returns the programs a row (the caller keeps that at or under the SM count on a GPU, as
    the plan does: a row's programs wait for each other) and what the launch returned (the compiled kernel)."""
    m, n = x.shape
    stride = x.stride(0)
    plan = softmax._split_realigned_plan(m, n, stride, x.element_size(), chunk_bytes, warps)
    off = x.data_ptr() % 16 // x.element_size()
    if off > x.storage_offset():
        raise ValueError("x's storage starts off the 16-byte grid: no aligned base to read it from")
    span = off + (m - 1) * stride + n
    base = torch.as_strided(x, (span,), (1,), x.storage_offset() - off)
    partials = torch.empty((2, m, plan.n_parts), dtype=torch.float32, device=x.device)
    done = torch.zeros((m,), dtype=torch.int32, device=x.device)
    kernel = _softmax_split_funnel[(m * plan.n_parts,)](base, y, partials, done, m, n, stride, off, plan.n_parts,
                                                        CHUNK=plan.meta["CHUNK"], BLOCK_S=plan.meta["BLOCK_S"],
                                                        num_warps=plan.meta["num_warps"])
    return plan.n_parts, kernel


# rows of 32769-65536 padded off the vector grid by an odd number of elements: the campaigns' hidden `odd` draws
# (1965 x 43657 by 9: 2026-12-02_padded_parts/4_*) and sweep_padded.WIDE_SHAPES' other odd ones; then an even
# padding there (planned on the resident kernel's 4-byte copies: 70% on the H200) and padded rows of 16384-32768 of
# 64 MB or more (the realigned kernel in parts: 61-67%), where a split is not planned today
SHAPES = ((1965, 43657, 9), (1432, 34447, 3), (806, 42132, 33), (1024, 40001, 3), (1024, 36001, 5), (800, 60001, 5),
          (1024, 50000, 2), (1029, 16655, 3), (1024, 20000, 3), (700, 24001, 1), (620, 30001, 7))


def softmax_split_funnel_trials(device: torch.device, dtype: torch.dtype) -> Iterator[Trial]:
    """Family `softmax_split_funnel`: the FUNNEL split over chunk bytes and warps beside the planned launch (past
    32768: the realigned split reading x element by element, or the resident kernel at an even padding; below: the
    realigned kernel in parts) and the same rows contiguous (what these rows cost without the padding); each config
    checked against fp32 first."""
    from sweep_padded import _checked, padded_inputs

    if dtype not in (torch.float16, torch.bfloat16):
        return
    for m, n, pad in SHAPES:
        x, y, ref, moved = padded_inputs(m, n, pad, dtype, device)
        yield ("softmax.planned", (m, n), f"planned pad={pad}", partial(softmax.candidate, x), moved, True)
        for chunk_bytes, warps in ((8192, 4), (8192, 2), (16384, 4), (16384, 8), (4096, 2), (32768, 8)):
            plan = softmax._split_realigned_plan(m, n, n + pad, 2, chunk_bytes, warps)
            if plan.n_parts > softmax._num_sms(device):
                continue
            yield from _checked(partial(run, x, y, chunk_bytes, warps), y, ref, "softmax.split_funnel", (m, n),
                                f"funnel pad={pad} chunk={chunk_bytes // 2} warps={warps}", moved)
        xc = x.contiguous()
        yield ("softmax.contiguous", (m, n), "contiguous rows (planned)", partial(softmax.candidate, xc), moved, False)
