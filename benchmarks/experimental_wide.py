"""Two softmax designs for the rows the realigned path does not serve well yet, swept by kernel_sweep.py on the H200
against the shipped plan (families `softmax_reread_odd`, `softmax_split_realigned`); shipped only if they win there.

`softmax_reread`: padded rows whose padding is not a whole number of 16-byte vectors (the `hidden_odd` draws). The
shipped realigned kernel reads x at the output window's positions, so x's loads are scalar there (37-47% of copy
bandwidth at row strides 19395 and 30905). Here the reductions read x through x's own vector window (vectors wholly
inside the row in the big tile, the row's part of its two edge vectors in a 2 x VEC tile, as the shipped kernel
does for y), prefetched a row ahead; the output pass re-reads x at y's window positions, element by element but
from L1/L2 (the row was read a moment ago), and stores whole vectors of y. HBM sees one read of x and one write of
y, all of it with full-width vectors; the price is a second, scalar pass over the row in cache.

`softmax_split_realigned` (since shipped as the built-in split path's REALIGNED form): contiguous rows of
32769-65536 whose length is not a multiple of a vector (the split path's accesses are narrower there: 58% of copy at
33508 wide against about 70% for aligned rows). The split path with its chunks cut from the output's vector window
of the row instead of from the row: a chunk loads and stores the row's whole vectors inside it (masked per vector),
and the chunk holding a row's first or last vector handles that vector's elements in a 2 x VEC tile, as the
realigned kernel does. The (max, sum of exp) rendezvous is the split path's. Compiled GPUs only for more than one
chunk per row (the interpreter runs programs one after another, so siblings would never meet). H200 bf16
(evidence/h200/2026-12-01_unaligned_rows/2_*): 60-66% of copy at 33508-65535 wide against 43-58% cut along the row;
63% against 72% for aligned 65536-wide rows, which keep the row cut.

`softmax_reread` lost (same evidence, 3_*): 32-56% against the planned 37-76%, ahead only at row strides 30905 and
32003 (by 2-3 points); not shipped.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from kernelproof_core.kernels import softmax
from kernelproof_core.kernels.softmax import _edges


@triton.jit
def _x_window(row: tl.tensor, M: tl.tensor, N: tl.tensor, stride_x: tl.tensor, vecs: tl.tensor,
              VEC: tl.constexpr) -> tuple[tl.tensor, tl.tensor, tl.tensor, tl.tensor]:
    # Row `row` of x seen through x's own vector window: the window's first element, the mask of the row's whole
    # vectors in it, and the row's edge-vector offsets and mask (all empty past the last row).
    start = row.to(tl.int64) * stride_x
    base = (start // VEC) * VEC
    shift = (start - base).to(tl.int32)
    e_offs, e_mask = _edges(shift, N, VEC)
    return base, (vecs >= shift) & (vecs + VEC <= shift + N) & (row < M), e_offs, e_mask & (row < M)


@triton.jit
def _softmax_reread(x_ptr: tl.tensor, y_ptr: tl.tensor, M: tl.tensor, N: tl.tensor, stride_x: tl.tensor,
                    WINDOW: tl.constexpr, VEC: tl.constexpr, EVICT: tl.constexpr) -> None:
    vecs = tl.arange(0, WINDOW // VEC) * VEC
    offs = vecs[:, None] + tl.arange(0, VEC)[None, :]
    step = tl.num_programs(0)
    row = tl.program_id(0)
    base, whole, e_offs, e_mask = _x_window(row, M, N, stride_x, vecs, VEC)
    nxt = tl.load(x_ptr + base + offs, mask=whole[:, None], other=float("-inf"),
                  eviction_policy="evict_last" if EVICT else "")
    nxt_e = tl.load(x_ptr + base + e_offs, mask=e_mask, other=float("-inf"),
                    eviction_policy="evict_last" if EVICT else "")
    while row < M:
        v = nxt
        v_e = nxt_e
        # the next row's loads (past the last row: fully masked, so no memory traffic; never used)
        base, whole, e_offs, e_mask = _x_window(row + step, M, N, stride_x, vecs, VEC)
        nxt = tl.load(x_ptr + base + offs, mask=whole[:, None], other=float("-inf"),
                      eviction_policy="evict_last" if EVICT else "")
        nxt_e = tl.load(x_ptr + base + e_offs, mask=e_mask, other=float("-inf"),
                        eviction_policy="evict_last" if EVICT else "")
        x = v.to(tl.float32)
        x_e = v_e.to(tl.float32)
        m = tl.maximum(tl.max(tl.max(x, axis=1), axis=0), tl.max(tl.max(x_e, axis=1), axis=0))
        inv = 1.0 / (tl.sum(tl.sum(tl.exp(x - m), axis=1), axis=0) + tl.sum(tl.sum(tl.exp(x_e - m), axis=1), axis=0))
        # The output pass, in y's window: x's element at window position p is x_row[p - y_shift].
        y_start = row.to(tl.int64) * N
        y_base = (y_start // VEC) * VEC
        y_shift = (y_start - y_base).to(tl.int32)
        x_at = x_ptr + row.to(tl.int64) * stride_x - y_shift
        y_whole = (vecs >= y_shift) & (vecs + VEC <= y_shift + N)
        x2 = tl.load(x_at + offs, mask=y_whole[:, None], other=float("-inf"),
                     eviction_policy="evict_first" if EVICT else "").to(tl.float32)
        tl.store(y_ptr + y_base + offs, (tl.exp(x2 - m) * inv).to(y_ptr.dtype.element_ty), mask=y_whole[:, None])
        y_offs, y_mask = _edges(y_shift, N, VEC)
        x2_e = tl.load(x_at + y_offs, mask=y_mask, other=float("-inf")).to(tl.float32)
        tl.store(y_ptr + y_base + y_offs, (tl.exp(x2_e - m) * inv).to(y_ptr.dtype.element_ty), mask=y_mask)
        row += step


def softmax_reread(x: torch.Tensor, y: torch.Tensor, programs_per_sm: int, warps: int, evict: bool = False) -> object:
    """Launch _softmax_reread on x (m x n, unit column stride, n > one vector) into contiguous y; returns the compiled
    kernel (kernel_sweep.py reports its registers and spills)."""
    m, n = x.shape
    window = triton.next_power_of_2(n + 16 // x.element_size() - 1)  # any row may start mid-vector
    grid = (min(m, programs_per_sm * softmax._num_sms(x.device)),)
    return _softmax_reread[grid](x, y, m, n, x.stride(0), WINDOW=window, VEC=16 // x.element_size(), EVICT=evict,
                                 num_warps=warps)


def softmax_split_realigned(x: torch.Tensor, y: torch.Tensor, chunk_bytes: int, warps: int) -> object:
    """The built-in's split path with REALIGNED chunks (shipped for unaligned 16-bit rows of 32769-65536) on x (m x n,
    unit column stride, n > one vector) into contiguous y, with explicit chunk bytes and warps. Needs a compiled GPU
    unless one chunk covers a row's window. Returns the compiled kernel."""
    m, n = x.shape
    plan = softmax._split_realigned_plan(m, n, x.stride(0), x.element_size(), chunk_bytes, warps)
    partials = torch.empty((2, m, plan.n_parts), dtype=torch.float32, device=x.device)
    done = torch.zeros((m,), dtype=torch.int32, device=x.device)
    return plan.launch(x, y, partials, done, m, n, x.stride(0), plan.n_parts, **plan.meta)
