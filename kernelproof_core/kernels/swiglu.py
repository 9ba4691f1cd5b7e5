"""Built-in swiglu candidate: y = silu(gate) * up, computed in FP32 and rounded once on store.

SwiGLU is pure streaming (two reads, one write per element), so the only goals are full-width vector
accesses and enough bytes in flight. Contiguous inputs use a flat 1-D kernel: no index math, and only the
last program pays for a mask. Strided rows (e.g. the two halves of a fused [M, 2N] projection) use a gather
kernel over the same flat stream of logical elements, splitting each aligned group of elements into row and column,
so views are read in place instead of being copied and ragged rows waste no lanes. Rows off the 16-byte grid (odd
widths or paddings) are walked in the output's own 16-byte vectors instead, each element read from its own row, or
where the paddings are even, the inputs in runs co-aligned with those vectors (SHIFTED); where a padding is odd
(16-bit rows), each run read as the two aligned 16-byte vectors holding it and funnel-shifted into place (FUNNEL).
Configs come from a fixed heuristic, not autotuning: the first call is cheap and every run picks the same
kernel.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

import torch
import triton
import triton.language as tl

# Flat path: elements per program and warps (8 per thread: one 16-byte vector of bf16). On the H200 (bf16, CUPTI
# kernel time) 1024 on 4 warps matched or beat 2048-8192 on 2-16 warps and torch.compile's kernel at 4096 x 4096,
# 4096 x 11008 and 32768 x 8192 (benchmarks/kernel_sweep.py --cupti --only swiglu_parity).
_FLAT_BLOCK, _FLAT_WARPS = 1024, 4
# Strided rows: logical elements per program and warps for the gather kernel (benchmarks/kernel_sweep.py --only swiglu).
_GATHER_BLOCK, _GATHER_WARPS = 1024, 4
# Odd widths under paddings of 2, 4 or 8 elements (SHIFTED): 512 elements a program on 2 warps, best or within 0.5 us
# of the best of five configs at all six shapes swept. H200, bf16, CUPTI (kernel_sweep.py --cupti --only
# swiglu_shifted, evidence/h200/2026-12-02_counters_fidelity/4_*), against the element reads: 2048 x 14335 padded
# by 2 44.9 us (94.2% of copy) against 52.8, 1322 x 10725 padded by 4 23.9 against 28.7, 4096 x 5001 padded by 16
# 32.7 against 38.8, 2048 x 11007 padded by 8 34.9 against 42.2, 3899 x 3047 padded by 32 21.4 against 24.6,
# 4005 x 14385 padded by 6 83.3 against 97.9; 241.1 us over the six against 270.1 for the two-read form before
# (1_* of the same evidence).
_SHIFTED_BLOCK, _SHIFTED_WARPS = 512, 2
# Odd paddings of 16-bit rows (FUNNEL: SHIFTED's walk, each run read as the two aligned 16-byte vectors holding it
# and funnel-shifted into place): 512 elements a program on 2 warps, the best of five configs at four of five odd
# paddings, within 0.5 us at the fifth. Measured on an H100 (sm_90, as the H200; no H200 was lent that session), bf16,
# CUPTI (kernel_sweep.py --cupti --only swiglu_funnel, evidence/h100/2026-12-05_funnel_ring_ab/1_*), against the
# element reads planned before: 3898 x 14017 padded by 21 111.7 us (98.3% of copy, the contiguous flat kernel 110.5)
# against 118.5, 2849 x 14880 by 1 87.4 against 93.8, 3399 x 14367 by 3 101.5 against 107.0, 1783 x 10131 by 1 40.2
# against 43.2, 4096 x 5001 by 7 44.7 against 48.2. At even paddings level with SHIFTED (2, 6, 32: within 0.5%).
_FUNNEL_BLOCK, _FUNNEL_WARPS = 512, 2


def _align(elsize: int, *values: int) -> int:
    """Largest power of two (at most one 16-byte vector) that divides every value, in elements."""
    a = max(1, 16 // elsize)
    while a > 1 and any(v % a for v in values):
        a //= 2
    return a


@triton.jit
def _silu_mul(g: tl.tensor, u: tl.tensor) -> tl.tensor:
    # g / (1 + exp(-g)) saturates cleanly: exp overflows to inf for g << 0 and the quotient becomes -0.
    return g / (1.0 + tl.exp(-g)) * u


@triton.jit
def _swiglu_flat(g_ptr: tl.tensor, u_ptr: tl.tensor, y_ptr: tl.tensor, n_elements: tl.tensor,
                 BLOCK: tl.constexpr) -> None:
    start = tl.program_id(0).to(tl.int64) * BLOCK
    offs = tl.arange(0, BLOCK)
    g_ptr += start
    u_ptr += start
    y_ptr += start
    if start + BLOCK <= n_elements:  # full block: unmasked, so loads vectorise whatever n_elements is
        g = tl.load(g_ptr + offs).to(tl.float32)
        u = tl.load(u_ptr + offs).to(tl.float32)
        tl.store(y_ptr + offs, _silu_mul(g, u).to(y_ptr.dtype.element_ty))
    else:
        mask = offs < n_elements - start
        g = tl.load(g_ptr + offs, mask=mask, other=0.0).to(tl.float32)
        u = tl.load(u_ptr + offs, mask=mask, other=0.0).to(tl.float32)
        tl.store(y_ptr + offs, _silu_mul(g, u).to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _swiglu_gather(g_ptr: tl.tensor, u_ptr: tl.tensor, y_ptr: tl.tensor, n_elements: tl.tensor, N: tl.tensor,
                   stride_g: tl.tensor, stride_u: tl.tensor, BLOCK: tl.constexpr, VEC: tl.constexpr,
                   WIDE: tl.constexpr) -> None:
    # Strided rows walked as the flat stream of logical elements the output is, so no lane is wasted on a ragged
    # last column tile (a 2-D tile of 4096 columns over 5000-wide rows leaves 39% of its lanes masked). The host
    # guarantees VEC divides N and both strides: each group of VEC consecutive logical elements then lies in one row
    # and is one aligned vector in memory, and the row/column split costs one division per group. WIDE: offsets
    # need 64 bits.
    N = (N // VEC) * VEC
    stride_g = (stride_g // VEC) * VEC
    stride_u = (stride_u // VEC) * VEC
    start = tl.program_id(0).to(tl.int64) * BLOCK if WIDE else tl.program_id(0) * BLOCK
    first = start + tl.arange(0, BLOCK // VEC) * VEC  # logical index of each group's first element
    row = first // N
    col = first - row * N
    lane = tl.arange(0, VEC)[None, :]
    g_ptrs = g_ptr + tl.multiple_of(row * stride_g + col, VEC)[:, None] + lane
    u_ptrs = u_ptr + tl.multiple_of(row * stride_u + col, VEC)[:, None] + lane
    y_ptrs = y_ptr + first[:, None] + lane
    if start + BLOCK <= n_elements:  # full block: unmasked
        g = tl.load(g_ptrs).to(tl.float32)
        u = tl.load(u_ptrs).to(tl.float32)
        tl.store(y_ptrs, _silu_mul(g, u).to(y_ptr.dtype.element_ty))
    else:  # n_elements is a multiple of VEC: whole groups are in or out
        mask = (first < n_elements)[:, None]
        g = tl.load(g_ptrs, mask=mask, other=0.0).to(tl.float32)
        u = tl.load(u_ptrs, mask=mask, other=0.0).to(tl.float32)
        tl.store(y_ptrs, _silu_mul(g, u).to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _vector_cells(start: tl.tensor, N: tl.tensor, BLOCK: tl.constexpr, VEC: tl.constexpr, COLS: tl.constexpr,
                  STEP: tl.constexpr) -> tuple[tl.tensor, tl.tensor, tl.tensor]:
    # The output vectors of a block of _swiglu_out_vectors: each vector's flat index, and the row and column of its
    # COLS cells STEP elements apart ([vectors, COLS]); a vector can straddle one row end (the host guarantees
    # N >= VEC), so cells past it are the next row's first elements.
    first = start + tl.arange(0, BLOCK // VEC) * VEC
    row = first // N
    col = first - row * N
    c = col[:, None] + tl.arange(0, COLS)[None, :] * STEP
    wrap = c >= N
    return first, row[:, None] + wrap.to(row.dtype), tl.where(wrap, c - N, c)


@triton.jit
def _out_vectors_grouped(g_ptr: tl.tensor, u_ptr: tl.tensor, y_ptr: tl.tensor, n_elements: tl.tensor, N: tl.tensor,
                         stride_g: tl.tensor, stride_u: tl.tensor, start: tl.tensor, BLOCK: tl.constexpr,
                         VEC: tl.constexpr, IN_VEC: tl.constexpr) -> None:
    # _swiglu_out_vectors with the inputs read IN_VEC elements at a time (4- or 8-byte loads) where the host
    # guarantees IN_VEC divides N and both strides: a group of IN_VEC then never straddles a row end. Loaded as
    # [vectors, VEC // IN_VEC, IN_VEC] and viewed as [vectors, VEC] for the 16-byte stores.
    G: tl.constexpr = VEC // IN_VEC
    N = (N // IN_VEC) * IN_VEC
    stride_g = (stride_g // IN_VEC) * IN_VEC
    stride_u = (stride_u // IN_VEC) * IN_VEC
    first, r, c = _vector_cells(start, N, BLOCK, VEC, G, IN_VEC)  # each group's first column
    lane = tl.arange(0, IN_VEC)[None, None, :]
    g_ptrs = g_ptr + tl.multiple_of(r * stride_g + c, [IN_VEC, IN_VEC])[:, :, None] + lane
    u_ptrs = u_ptr + tl.multiple_of(r * stride_u + c, [IN_VEC, IN_VEC])[:, :, None] + lane
    y_ptrs = y_ptr + tl.multiple_of(first, VEC)[:, None] + tl.arange(0, VEC)[None, :]
    if start + BLOCK <= n_elements:
        g = tl.load(g_ptrs).to(tl.float32)
        u = tl.load(u_ptrs).to(tl.float32)
        y = tl.reshape(_silu_mul(g, u), (BLOCK // VEC, VEC))
        tl.store(y_ptrs, y.to(y_ptr.dtype.element_ty))
    else:  # n_elements is a multiple of IN_VEC: whole groups are in or out
        flat = (first[:, None] + tl.arange(0, G)[None, :] * IN_VEC)[:, :, None] + lane
        g = tl.load(g_ptrs, mask=flat < n_elements, other=0.0).to(tl.float32)
        u = tl.load(u_ptrs, mask=flat < n_elements, other=0.0).to(tl.float32)
        y = tl.reshape(_silu_mul(g, u), (BLOCK // VEC, VEC))
        mask = first[:, None] + tl.arange(0, VEC)[None, :] < n_elements
        tl.store(y_ptrs, y.to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _shifted_cells(start: tl.tensor, N: tl.tensor, stride_g: tl.tensor, stride_u: tl.tensor, BLOCK: tl.constexpr,
                   VEC: tl.constexpr, IN_VEC: tl.constexpr) -> tuple[tl.tensor, ...]:
    # The output vectors of a SHIFTED block: each vector's flat index and column, the lanes, the inputs' paddings
    # (multiples of IN_VEC) and where each vector's run starts in them (f + row x pad, aligned to IN_VEC).
    pad_g = ((stride_g - N) // IN_VEC) * IN_VEC
    pad_u = ((stride_u - N) // IN_VEC) * IN_VEC
    first = start + tl.arange(0, BLOCK // VEC) * VEC
    row = first // N
    col = first - row * N
    lane = tl.arange(0, VEC)[None, :]
    at_g = tl.multiple_of(first + row * pad_g, IN_VEC)[:, None] + lane
    at_u = tl.multiple_of(first + row * pad_u, IN_VEC)[:, None] + lane
    return first, col, lane, pad_g, pad_u, at_g, at_u


@triton.jit
def _out_vectors_shifted(g_ptr: tl.tensor, u_ptr: tl.tensor, y_ptr: tl.tensor, n_elements: tl.tensor, N: tl.tensor,
                         stride_g: tl.tensor, stride_u: tl.tensor, start: tl.tensor, BLOCK: tl.constexpr,
                         VEC: tl.constexpr, IN_VEC: tl.constexpr) -> None:
    # _swiglu_out_vectors for rows whose paddings (stride - N) are multiples of IN_VEC, whatever the width: an
    # input's element at flat index f of row r lies at f + r * pad, so the part of an output vector in one row is
    # a run of its input aligned to IN_VEC, read in IN_VEC-element accesses. Every vector is first written whole
    # from its run; a vector straddling a row end then has its lanes past N rewritten (same thread, program order)
    # from the next row, pad elements further on, in blocks that hold a row end only. The grid's last block, which
    # the tensor can end inside, is read element by element. Reading both runs at once and
    # selecting (the form before) held two vectors of each input: 54-56 registers a thread against 29-30 without
    # the second read, 48% occupancy, and 12-20% of the time at 16-byte runs (H200, swiglu_shifted_parts,
    # evidence/h200/2026-12-02_counters_fidelity/1_*). Every address read lies in the row's padded extent or the next
    # row's (the host guarantees N >= VEC and paddings >= 0).
    first, col, lane, pad_g, pad_u, at_g, at_u = _shifted_cells(start, N, stride_g, stride_u, BLOCK, VEC, IN_VEC)
    in_row = col[:, None] + lane < N
    y_ptrs = y_ptr + tl.multiple_of(first, VEC)[:, None] + lane
    ends = (start + BLOCK - 1) // N != start // N  # a row end inside the block
    if start + BLOCK <= n_elements:
        g = tl.load(g_ptr + at_g).to(tl.float32)
        u = tl.load(u_ptr + at_u).to(tl.float32)
        tl.store(y_ptrs, _silu_mul(g, u).to(y_ptr.dtype.element_ty))
        if ends:  # the next row's run read whole (masked per vector: it stays IN_VEC wide), its lanes past N stored
            tail = (col + VEC > N)[:, None]
            g = tl.load(g_ptr + at_g + pad_g, mask=tail, other=0.0).to(tl.float32)
            u = tl.load(u_ptr + at_u + pad_u, mask=tail, other=0.0).to(tl.float32)
            tl.store(y_ptrs, _silu_mul(g, u).to(y_ptr.dtype.element_ty), mask=tail & ~in_row)
    else:  # the last block, element by element in VEC slices (few registers: the full path's set the kernel's)
        lanes: tl.constexpr = BLOCK // VEC
        for k in tl.static_range(VEC):
            f = start + k * lanes + tl.arange(0, lanes)
            ok = f < n_elements
            r = f // N
            c = f - r * N
            g_k = tl.load(g_ptr + r * stride_g + c, mask=ok, other=0.0).to(tl.float32)
            u_k = tl.load(u_ptr + r * stride_u + c, mask=ok, other=0.0).to(tl.float32)
            tl.store(y_ptr + f, _silu_mul(g_k, u_k).to(y_ptr.dtype.element_ty), mask=ok)


@triton.jit
def _swiglu_out_vectors(g_ptr: tl.tensor, u_ptr: tl.tensor, y_ptr: tl.tensor, n_elements: tl.tensor, N: tl.tensor,
                        stride_g: tl.tensor, stride_u: tl.tensor, BLOCK: tl.constexpr, VEC: tl.constexpr,
                        WIDE: tl.constexpr, IN_VEC: tl.constexpr = 1, SHIFTED: tl.constexpr = False) -> None:
    # Rows whose width or strides are not multiples of a 16-byte vector, where the gather kernel would walk them in
    # groups of as few as one element (one row/column division and one 2-byte store per element). Here the output's
    # flat stream (y is contiguous) is walked in its own VEC-element vectors: one division per vector, one vector
    # store, and each element's inputs loaded from its own row (a vector can straddle one row end: the host
    # guarantees N >= VEC). On the H200 (bf16, CUPTI) +0.7 to +1.9 points of copy over the gather kernel at four of
    # five odd shapes, level at the fifth (evidence/h200/2026-12-01_cluster_apart/1_*). WIDE: offsets need 64 bits.
    # IN_VEC > 1 (planned where 2 or 4 divides the width and both strides): inputs read in groups of IN_VEC, 79-85%
    # of copy to 94-99% at three even widths (evidence/h200/2026-12-02_in_vec_table/1_*). SHIFTED (planned where
    # IN_VEC divides both paddings but not the width): _out_vectors_shifted.
    start = tl.program_id(0).to(tl.int64) * BLOCK if WIDE else tl.program_id(0) * BLOCK
    if SHIFTED:
        _out_vectors_shifted(g_ptr, u_ptr, y_ptr, n_elements, N, stride_g, stride_u, start, BLOCK, VEC, IN_VEC)
        return
    if IN_VEC > 1:
        _out_vectors_grouped(g_ptr, u_ptr, y_ptr, n_elements, N, stride_g, stride_u, start, BLOCK, VEC, IN_VEC)
        return
    first, r, c = _vector_cells(start, N, BLOCK, VEC, VEC, 1)
    g_ptrs = g_ptr + r * stride_g + c
    u_ptrs = u_ptr + r * stride_u + c
    y_ptrs = y_ptr + tl.multiple_of(first, VEC)[:, None] + tl.arange(0, VEC)[None, :]
    if start + BLOCK <= n_elements:  # full block: unmasked
        g = tl.load(g_ptrs).to(tl.float32)
        u = tl.load(u_ptrs).to(tl.float32)
        tl.store(y_ptrs, _silu_mul(g, u).to(y_ptr.dtype.element_ty))
    else:
        mask = first[:, None] + tl.arange(0, VEC)[None, :] < n_elements
        g = tl.load(g_ptrs, mask=mask, other=0.0).to(tl.float32)
        u = tl.load(u_ptrs, mask=mask, other=0.0).to(tl.float32)
        tl.store(y_ptrs, _silu_mul(g, u).to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _words8(c: tl.tensor) -> tuple[tl.tensor, ...]:
    # The 8 words of each row of c ([vectors, 8] int32) as [vectors] tensors: splits, all in registers.
    q = tl.reshape(c, (c.shape[0], 2, 2, 2))  # word j at [j // 4, (j // 2) % 2, j % 2]
    e, o = tl.split(q)
    e0, e1 = tl.split(e)
    o0, o1 = tl.split(o)
    c0, c4 = tl.split(e0)
    c2, c6 = tl.split(e1)
    c1, c5 = tl.split(o0)
    c3, c7 = tl.split(o1)
    return c0, c1, c2, c3, c4, c5, c6, c7


@triton.jit
def _pick(h: tl.tensor, x0: tl.tensor, x1: tl.tensor, x2: tl.tensor, x3: tl.tensor) -> tl.tensor:
    # x[h] for h in 0-3 (per vector): two selects on h's bits.
    return tl.where((h & 2) != 0, tl.where((h & 1) != 0, x3, x2), tl.where((h & 1) != 0, x1, x0))


@triton.jit
def _funnel(lo: tl.tensor, hi: tl.tensor, odd: tl.tensor) -> tl.tensor:
    # The word starting one 16-bit element into lo where odd: lo's high half, then hi's low half.
    shifted = (lo.to(tl.uint32, bitcast=True) >> 16) | (hi.to(tl.uint32, bitcast=True) << 16)
    return tl.where(odd, shifted.to(tl.int32, bitcast=True), lo)


@triton.jit
def _halves(w: tl.tensor, DT: tl.constexpr) -> tuple[tl.tensor, tl.tensor]:
    # The two 16-bit elements a word holds (the low half first in memory), as fp32.
    lo = w.to(tl.int16).to(DT, bitcast=True).to(tl.float32)
    hi = (w >> 16).to(tl.int16).to(DT, bitcast=True).to(tl.float32)
    return lo, hi


@triton.jit
def _vector8(e0: tl.tensor, e1: tl.tensor, e2: tl.tensor, e3: tl.tensor, e4: tl.tensor, e5: tl.tensor,
             e6: tl.tensor, e7: tl.tensor) -> tl.tensor:
    # [vectors, 8] from 8 [vectors] tensors (_words8's inverse): joins, all in registers.
    ev = tl.join(tl.join(e0, e4), tl.join(e2, e6))
    od = tl.join(tl.join(e1, e5), tl.join(e3, e7))
    return tl.reshape(tl.join(ev, od), (e0.shape[0], 8))


@triton.jit
def _funnel_run(base: tl.tensor, at: tl.tensor, DT: tl.constexpr, mask: tl.tensor | None = None) -> tl.tensor:
    # The 8 16-bit elements from element `at` of base (an int32 pointer to a 16-byte aligned base; `at` any
    # alignment, [vectors]) where mask (None: every vector): the two 16-byte vectors holding them read whole (the
    # second only where the run leaves the first), then put in place word by word (a funnel shift where the run
    # starts on an odd element), as fp32 [vectors, 8].
    s = (at % 8).to(tl.int32)
    w = tl.arange(0, 8)[None, :]
    ptrs = base + tl.multiple_of((at // 8) * 4, 4)[:, None] + w
    ok = (w < 4) | (s > 0)[:, None]
    if mask is not None:
        ok = ok & mask[:, None]
    c = tl.load(ptrs, mask=ok, other=0)
    c0, c1, c2, c3, c4, c5, c6, c7 = _words8(c)
    h = s // 2
    odd = (s % 2) != 0
    p0 = _pick(h, c0, c1, c2, c3)
    p1 = _pick(h, c1, c2, c3, c4)
    p2 = _pick(h, c2, c3, c4, c5)
    p3 = _pick(h, c3, c4, c5, c6)
    p4 = _pick(h, c4, c5, c6, c7)
    e0, e1 = _halves(_funnel(p0, p1, odd), DT)
    e2, e3 = _halves(_funnel(p1, p2, odd), DT)
    e4, e5 = _halves(_funnel(p2, p3, odd), DT)
    e6, e7 = _halves(_funnel(p3, p4, odd), DT)
    return _vector8(e0, e1, e2, e3, e4, e5, e6, e7)


@triton.jit
def _swiglu_funnel(g_ptr: tl.tensor, u_ptr: tl.tensor, y_ptr: tl.tensor, n_elements: tl.tensor, N: tl.tensor,
                   stride_g: tl.tensor, stride_u: tl.tensor, off_g: tl.tensor, off_u: tl.tensor,
                   BLOCK: tl.constexpr, WIDE: tl.constexpr) -> None:
    # Padded rows of 16-bit elements whose paddings are odd (FUNNEL: SHIFTED's walk with 16-byte input reads whatever
    # the padding): y's flat stream in its own 8-element vectors; a vector's part in row r is a run of its input at
    # f + r * pad (+ the input's own offset from its 16-byte aligned base, off_*), read by _funnel_run; a vector
    # straddling a row end has its lanes past N rewritten from the next row's run (pad elements further on). The
    # grid's last block, which the tensor can end inside, element by element. g_ptr / u_ptr: the aligned bases.
    DT: tl.constexpr = y_ptr.dtype.element_ty
    VEC: tl.constexpr = 8
    V: tl.constexpr = BLOCK // VEC
    start = tl.program_id(0).to(tl.int64) * BLOCK if WIDE else tl.program_id(0) * BLOCK
    gw = g_ptr.to(tl.pointer_type(tl.int32), bitcast=True)
    uw = u_ptr.to(tl.pointer_type(tl.int32), bitcast=True)
    pad_g = stride_g - N
    pad_u = stride_u - N
    first = start + tl.arange(0, V) * VEC
    row = first // N
    col = first - row * N
    lane = tl.arange(0, VEC)[None, :]
    y_ptrs = y_ptr + tl.multiple_of(first, VEC)[:, None] + lane
    if start + BLOCK <= n_elements:
        at_g = off_g + first + row * pad_g
        at_u = off_u + first + row * pad_u
        y = _silu_mul(_funnel_run(gw, at_g, DT), _funnel_run(uw, at_u, DT))
        tl.store(y_ptrs, y.to(DT))
        if (start + BLOCK - 1) // N != start // N:  # a row end inside the block: the tails from the next row
            tail = col + VEC > N
            y = _silu_mul(_funnel_run(gw, at_g + pad_g, DT, tail), _funnel_run(uw, at_u + pad_u, DT, tail))
            tl.store(y_ptrs, y.to(DT), mask=tail[:, None] & (col[:, None] + lane >= N))
    else:
        for k in tl.static_range(VEC):
            f = start + k * V + tl.arange(0, V)
            ok = f < n_elements
            r = f // N
            c = f - r * N
            g_k = tl.load(g_ptr + off_g + r * stride_g + c, mask=ok, other=0.0).to(tl.float32)
            u_k = tl.load(u_ptr + off_u + r * stride_u + c, mask=ok, other=0.0).to(tl.float32)
            tl.store(y_ptr + f, _silu_mul(g_k, u_k).to(DT), mask=ok)


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)  # triton.cdiv is a @jit function: calling it on the host costs microseconds


def _launch_funnel(kernel: Callable[..., object], gate: torch.Tensor, up: torch.Tensor, y: torch.Tensor,
                   n_elements: int, n: int, stride_g: int, stride_u: int, **meta: int) -> None:
    """_swiglu_funnel on gate and up seen from their 16-byte aligned bases (it reads whole aligned vectors); an
    input whose storage starts off that grid (never from torch's allocators) takes the element reads instead."""
    bases = []
    for t, stride in ((gate, stride_g), (up, stride_u)):
        off = t.data_ptr() % 16 // t.element_size()
        if off > t.storage_offset():
            grid = (_cdiv(n_elements, _GATHER_BLOCK),)
            _swiglu_out_vectors[grid](gate, up, y, n_elements, n, stride_g, stride_u, BLOCK=_GATHER_BLOCK,
                                      VEC=8, WIDE=meta["WIDE"], num_warps=_GATHER_WARPS)
            return
        span = off + (n_elements // n - 1) * stride + n
        bases.append((torch.as_strided(t, (span,), (1,), t.storage_offset() - off), off))
    (base_g, off_g), (base_u, off_u) = bases
    kernel(base_g, base_u, y, n_elements, n, stride_g, stride_u, off_g, off_u, **meta)


Launch = tuple[Callable[..., object], dict[str, int], bool]  # launcher, meta-parameters, flat (contiguous) path
# Launch plans per (shape, strides, dtype, device): a call of a known shape costs a dict lookup instead of the
# planning arithmetic, which matters when the kernel itself takes 2 us. Bounded so odd shape streams cannot grow it.
_PLANS: dict[tuple[object, ...], Launch] = {}
_MAX_PLANS = 4096


def _plan(m: int, n: int, stride_g: int, stride_u: int, elsize: int, device: torch.device) -> Launch:
    total = m * n
    if stride_g == n and stride_u == n:  # both contiguous: one flat stream
        return _swiglu_flat[(_cdiv(total, _FLAT_BLOCK),)], {"BLOCK": _FLAT_BLOCK, "num_warps": _FLAT_WARPS}, True
    vec, full = _align(elsize, n, stride_g, stride_u), max(1, 16 // elsize)
    wide = (m - 1) * max(stride_g, stride_u) + n >= 2**31 - _GATHER_BLOCK or total >= 2**31 - _GATHER_BLOCK
    off_grid = vec < full <= n  # rows off the 16-byte grid, at least one vector wide: walked in y's own vectors
    grid = (_cdiv(total, _GATHER_BLOCK),)
    meta = {"BLOCK": _GATHER_BLOCK, "WIDE": wide, "num_warps": _GATHER_WARPS}
    if off_grid:  # inputs in groups of vec (a group never straddles a row end: vec divides width and strides)
        # or in groups of what divides the paddings; not where rows overlap (a negative padding: a straddling
        # vector's reads could fall outside the storage)
        shift = _align(elsize, stride_g - n, stride_u - n)
        if elsize == 2 and max(vec, shift) == 1 and min(stride_g, stride_u) >= n:  # odd paddings: FUNNEL
            grid = (_cdiv(total, _FUNNEL_BLOCK),)
            return partial(_launch_funnel, _swiglu_funnel[grid]), {
                "BLOCK": _FUNNEL_BLOCK, "WIDE": wide, "num_warps": _FUNNEL_WARPS}, False
        if shift > vec and min(stride_g, stride_u) >= n:
            return _swiglu_out_vectors[(_cdiv(total, _SHIFTED_BLOCK),)], {
                "BLOCK": _SHIFTED_BLOCK, "WIDE": wide, "num_warps": _SHIFTED_WARPS, "VEC": full, "IN_VEC": shift,
                "SHIFTED": True}, False
        return _swiglu_out_vectors[grid], {**meta, "VEC": full, "IN_VEC": vec}, False
    return _swiglu_gather[grid], {**meta, "VEC": vec}, False


def candidate(gate: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
    """silu(gate) * up for 2-D gate and up of one shape and dtype; the result is a new contiguous tensor."""
    m, n = gate.shape
    if gate.stride(1) != 1:  # column strides are not a supported fast path; rows with padding are
        gate = gate.contiguous()
    if up.stride(1) != 1:
        up = up.contiguous()
    device = gate.device
    y = torch.empty((m, n), dtype=gate.dtype, device=device)
    if m == 0 or n == 0:
        return y
    stride_g, stride_u = gate.stride(0), up.stride(0)
    if m == 1:  # a single row is contiguous whatever its row stride says
        stride_g = stride_u = n
    key = (m, n, stride_g, stride_u, gate.dtype, device)
    plan = _PLANS.get(key)
    if plan is None:
        if len(_PLANS) >= _MAX_PLANS:
            _PLANS.clear()
        plan = _PLANS[key] = _plan(m, n, stride_g, stride_u, gate.element_size(), device)
    launch, meta, flat = plan
    if flat:
        launch(gate, up, y, m * n, **meta)
    else:
        launch(gate, up, y, m * n, n, stride_g, stride_u, **meta)
    return y
