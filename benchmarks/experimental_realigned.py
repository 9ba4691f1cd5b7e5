"""Softmax's realigned path (contiguous rows whose length is not a multiple of a 16-byte vector) with the costs of
staying inside the input taken apart.

`_softmax_realigned_x` is the realigned kernel as first shipped: each row read through the window of whole vectors
that covers it, neighbouring rows' elements masked by a select. Its first form loaded the tensor's last vector whole,
up to 7 elements past the input, and reached 60% (1723 x 25249) and 74% (2048 x 32001) of copy bandwidth on the
H200; the in-bounds form (a bounds term in every vector's load mask, the last row re-read element by element behind
`if row == M - 1`) reached 47% and 61%. This kernel times the pieces:
  BOUND=0   no bounds term, no reload: the over-reading form (correct output; reads past the input's end)
  BOUND=1   the in-bounds form as it shipped
  BOUND=2   the bounds term, and the tensor's last partial vector loaded element by element into its place by a
            select (no branch, no second pass over the row)
  BOUND=3   as 0, over rows 0 .. M-2 only, the last row left to a second launch (`softmax_realigned_split`): no
            window of those rows reaches the input's end
  BOUND=4   whole vectors inside the row loaded as vectors, the two edge vectors element by element (a second,
            scalar load masked to the row's own elements, merged by a select): nothing outside the row is read,
            neighbouring rows included
  BOUND=5   the kernel shipped since (softmax._softmax_realigned): only the row's whole vectors in the big tile,
            the row's part of its two edge vectors in a second tile of 2 x VEC elements loaded, reduced and stored
            element by element: no per-element select over the big tile, no scalar stores across it, nothing
            outside the row read
  BOUND=6   the same with FAST (exp as exp2 of one fused multiply-add)
  EDGE=False skips the element-wise stores of the rows' two edge vectors: wrong output, timing only (what the
            scalar edge stores cost)
kernel_sweep.py --only softmax_realigned_bounds runs them against the shipped launch. H200, bf16, CUPTI kernel time
(evidence/h200/2026-12-01_wide_rows/2_realigned_bounds_packed_sweep/, 3_interior_sweep/), 1723 x 25249 / 2048 x 32001
on 32 warps: BOUND=0 52.7% / 67.9% (60.7% / 71.9% without the edge stores), 1 46.6% / 59.6%, 2 44.2% / 54.7%,
3 48.5% / 62.8%, 4 32.9% / 40.6%; BOUND=5 on 16 warps 79.5% / 87.9%.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from kernelproof_core.kernels import softmax


@triton.jit
def _softmax_realigned_x(x_ptr: tl.tensor, y_ptr: tl.tensor, M: tl.tensor, N: tl.tensor, WINDOW: tl.constexpr,
                         VEC: tl.constexpr, BOUND: tl.constexpr, EDGE: tl.constexpr) -> None:
    vecs = tl.arange(0, WINDOW // VEC) * VEC
    lanes = tl.arange(0, VEC)
    offs = vecs[:, None] + lanes[None, :]
    end = N.to(tl.int64) * M
    if BOUND == 3:
        end = N.to(tl.int64) * (M + 1)  # this launch covers M rows of M + 1: the last row is not its to read
    tail = (end // VEC) * VEC  # where the input's last partial vector starts (== end when there is none)
    step = tl.num_programs(0)
    row = tl.program_id(0)
    base = (row.to(tl.int64) * N // VEC) * VEC
    shift = (row.to(tl.int64) * N - base).to(tl.int32)
    keep = (vecs + VEC > shift) & (vecs < shift + N) & (row < M)
    if BOUND == 1 or BOUND == 2:
        keep = keep & (base + vecs + VEC <= end)
    if BOUND == 4:
        keep = (vecs >= shift) & (vecs + VEC <= shift + N) & (row < M)
    nxt = tl.load(x_ptr + base + offs, mask=keep[:, None], other=float("-inf"))
    if BOUND == 4:
        nxt_edge = tl.load(x_ptr + base + offs, other=float("-inf"),
                           mask=(offs >= shift) & (offs < shift + N) & ~keep[:, None] & (row < M))
        nxt = tl.where(keep[:, None], nxt, nxt_edge)
    nxt_shift = shift
    while row < M:
        v = nxt
        shift = nxt_shift
        base = (row.to(tl.int64) * N // VEC) * VEC
        ahead = row + step
        a_base = (ahead.to(tl.int64) * N // VEC) * VEC
        nxt_shift = (ahead.to(tl.int64) * N - a_base).to(tl.int32)
        keep = (vecs + VEC > nxt_shift) & (vecs < nxt_shift + N) & (ahead < M)
        if BOUND == 1 or BOUND == 2:
            keep = keep & (a_base + vecs + VEC <= end)
        if BOUND == 4:
            keep = (vecs >= nxt_shift) & (vecs + VEC <= nxt_shift + N) & (ahead < M)
        nxt = tl.load(x_ptr + a_base + offs, mask=keep[:, None], other=float("-inf"))
        if BOUND == 4:
            nxt_edge = tl.load(x_ptr + a_base + offs, other=float("-inf"),
                               mask=(offs >= nxt_shift) & (offs < nxt_shift + N) & ~keep[:, None] & (ahead < M))
            nxt = tl.where(keep[:, None], nxt, nxt_edge)
        in_row = (offs >= shift) & (offs < shift + N)
        if BOUND == 1:
            if row == M - 1:
                v = tl.load(x_ptr + base + offs, mask=in_row, other=float("-inf"))
        if BOUND == 2:
            t = tl.load(x_ptr + tail + lanes, mask=(tail + lanes < end) & (row == M - 1), other=float("-inf"))
            v = tl.where((base + vecs == tail)[:, None], t[None, :], v)
        x = tl.where(in_row, v.to(tl.float32), float("-inf"))
        e = tl.exp(x - tl.max(tl.max(x, axis=1), axis=0))
        out = (e * (1.0 / tl.sum(tl.sum(e, axis=1), axis=0))).to(y_ptr.dtype.element_ty)
        y_ptrs = y_ptr + base + offs
        whole = (vecs >= shift) & (vecs + VEC <= shift + N)
        tl.store(y_ptrs, out, mask=whole[:, None])
        if EDGE:
            tl.store(y_ptrs, out, mask=in_row & ~whole[:, None])
        row += step


def softmax_realigned_x(x: torch.Tensor, y: torch.Tensor, bound: int, edge: bool, programs_per_sm: int,
                        warps: int) -> object:
    """Launch the experimental realigned kernel on contiguous x (m x n, n not a multiple of a vector) into y; with
    bound=3 the last row goes to the built-in's pipelined kernel in a second launch. Returns the compiled kernel
    (its registers and spills are what kernel_sweep.py reports)."""
    m, n = x.shape
    if bound in (5, 6):  # the shipped kernel; 6: with FAST
        launch, meta = softmax._realigned_plan(m, n, x.stride(0), x.element_size(), softmax._num_sms(x.device),
                                               programs_per_sm, warps, bound == 6)
        return launch(x, y, m, n, x.stride(0), **meta)
    rows = m - 1 if bound == 3 else m
    grid = (min(rows, programs_per_sm * softmax._num_sms(x.device)),)
    kernel = _softmax_realigned_x[grid](x, y, rows, n, WINDOW=softmax._window(n, x.element_size()),
                                        VEC=16 // x.element_size(), BOUND=bound, EDGE=edge, num_warps=warps)
    if bound == 3:
        # The last row on its own: a one-row view at element offset (m - 1) * n, addressed row by row.
        last_x, last_y = x[m - 1:], y[m - 1:]
        softmax._softmax_pipelined[(1,)](last_x, last_y, 1, n, n, BLOCK_N=triton.next_power_of_2(n),
                                         ALIGN=softmax._align(x.element_size(), n), num_warps=softmax._PIPELINED_WARPS)
    return kernel
