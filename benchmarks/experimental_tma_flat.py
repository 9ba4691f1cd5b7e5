"""Softmax of contiguous rows of any width fed by TMA through a flat view (the last trials of sweep family
`softmax_pipeline_local`; built and compiled for sm_90, to be measured on the H200 before any of it ships).

Why: TMA copies whole boxes from 16-byte-aligned rows, so experimental_tma_rows.py takes rows whose width is a
multiple of 256 only; the campaign's unaligned cases (random0 1723 x 25249, random2 1991 x 33508, 76-85% of copy) are
contiguous. Seen flat, x is [M N / 256, 256] box rows on the 16-byte grid whatever N is, and row r is the run of
elements r N .. r N + N, inside box rows r N // 256 onwards: NB boxes of W box rows (the row plus up to 255 elements
either side; shared allocations and boxes are powers of two a dimension, so each box is its own allocation) bring it
into a slot, offset by sh = r N mod 256. As the shipped resident kernel's REALIGN does, a row
is read and written in the 16-byte vectors wholly inside it (vector stores, masked a vector at a time), and its two
edge vectors element by element from global memory. The copies cannot reach past the last whole box row, so a last
row that ends inside a partial box row (M N not a multiple of 256) is done from global memory alone.

Same pipeline as experimental_tma_rows.py: three slots, an mbarrier each, a row's copy issued by one thread after a
CTA barrier, a row past the last completing its slot's phase by a plain arrival.
"""

from __future__ import annotations

import torch
from experimental_cluster_rows import _LOG2E
from experimental_tma_rows import LANES
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import fence_async_shared, mbarrier, tma
from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

_LANES = gl.constexpr(LANES)


@gluon.jit
def _issue_flat(desc: gl.tensor, boxes: gl.tuple, FIRST: gl.constexpr, bar: gl.tensor, row: gl.tensor, M: gl.tensor,
                N: gl.tensor, NB: gl.constexpr) -> None:
    # Row `row`'s box rows into the slot's NB boxes boxes[FIRST ..] (every thread has finished reading them: the
    # caller's barrier), or past the last row a plain arrival.
    W: gl.constexpr = gl.num_warps()
    live = row < M
    first = ((row.to(gl.int64) * N) // _LANES).to(gl.int32)
    fence_async_shared()
    mbarrier.expect(bar, NB * W * _LANES * desc.dtype.primitive_bitwidth // 8, pred=live)
    for b in gl.static_range(NB):
        tma.async_copy_global_to_shared(desc, [0, first + b * W, 0], bar, boxes[FIRST + b], pred=live)
    mbarrier.arrive(bar, pred=row >= M)


@gluon.jit
def _vec_inside(c: gl.constexpr, vec: gl.tensor, sh: gl.tensor, N: gl.tensor) -> gl.tensor:
    # Slice c's 16-byte vectors wholly inside the row (slot positions sh .. sh + N), [1, W, 32, 1]-shaped.
    W: gl.constexpr = gl.num_warps()
    at = vec + c * W * _LANES
    return (at >= sh) & (at + 8 <= sh + N)


@gluon.jit
def _edges(start: gl.tensor, N: gl.tensor, e_pos: gl.tensor, e_k: gl.tensor) -> tuple[gl.tensor, gl.tensor]:
    # The row's part of the vectors holding its first and last elements when they are partial (flat offsets and a
    # mask, [2, 8]); a whole edge vector is read and written with the others. Rows are 256 or wider: never one.
    sh = (start % 8).to(gl.int32)
    end = start + N  # one past the row's last element
    e_start = gl.where(e_pos == 0, start - sh, ((end - 1) // 8) * 8)[:, None]
    offs = e_start + e_k
    partial = gl.where(e_pos == 0, sh != 0, end % 8 != 0)[:, None]
    return offs, (offs >= start) & (offs < end) & partial


@gluon.jit
def _softmax_tma_flat(desc: gl.tensor, x_ptr: gl.tensor, y_ptr: gl.tensor, M: gl.tensor, N: gl.tensor,
                      FULL: gl.tensor, NB: gl.constexpr) -> None:
    # Shared allocations and TMA boxes must be powers of two a dimension, and a row is not: each slot is NB boxes of
    # W box rows, each its own allocation (boxes[t NB + c]: slot t's slice c, also the loops' unit).
    W: gl.constexpr = gl.num_warps()
    layout: gl.constexpr = gl.BlockedLayout([1, 1, 1, 8], [1, 1, 32, 1], [1, W, 1, 1], [3, 2, 1, 0])
    boxes = ()
    bars = ()
    for _ in gl.static_range(3):
        for _ in gl.static_range(NB):
            boxes = boxes + (gl.allocate_shared_memory(desc.dtype, [1, W, _LANES], desc.layout),)  # noqa: RUF005
        bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
        mbarrier.init(bar, count=1)
        bars = bars + (bar,)  # noqa: RUF005
    fence_async_shared()
    w = gl.arange(0, W, layout=gl.SliceLayout(0, gl.SliceLayout(2, gl.SliceLayout(3, layout))))
    v = gl.arange(0, 32, layout=gl.SliceLayout(0, gl.SliceLayout(1, gl.SliceLayout(3, layout))))
    k = gl.arange(0, 8, layout=gl.SliceLayout(0, gl.SliceLayout(1, gl.SliceLayout(2, layout))))
    vec = w[None, :, None, None] * _LANES + v[None, None, :, None] * 8  # a vector's slot position in slice 0
    offs = vec + k[None, None, None, :]
    e_layout: gl.constexpr = gl.BlockedLayout([1, 8], [2, 16], [1, W], [1, 0])
    e_pos = gl.arange(0, 2, layout=gl.SliceLayout(1, e_layout))
    e_k = gl.arange(0, 8, layout=gl.SliceLayout(0, e_layout))[None, :]
    pid = gl.program_id(0)
    n_rows = gl.num_programs(0)
    _issue_flat(desc, boxes, 0, bars[0], pid, FULL, N, NB)
    _issue_flat(desc, boxes, NB, bars[1], pid + n_rows, FULL, N, NB)
    it = 0
    for row in range(pid, M, n_rows):
        # Slot s = i mod 3 holds row pid + i n_rows; it is used the (i // 3)-th time: phase (i // 3) & 1.
        i = it
        s = i % 3
        gl.thread_barrier()  # the slot two rows back (this row + 2's) is read by every thread
        for t in gl.static_range(3):
            if (s + 2) % 3 == t:  # row i + 2's slot, last read by row i - 1
                _issue_flat(desc, boxes, t * NB, bars[t], row + 2 * n_rows, FULL, N, NB)
        start = row.to(gl.int64) * N
        base = (start // _LANES) * _LANES  # the slot's first element, flat (a multiple of 256: vector stores)
        sh = (start - base).to(gl.int32)
        e_offs, e_mask = _edges(start, N, e_pos, e_k)
        x_e = gl.load(x_ptr + e_offs, mask=e_mask, other=float("-inf")).to(gl.float32)
        if row < FULL:
            m_t = gl.full([1, W, 32], float("-inf"), gl.float32, gl.SliceLayout(3, layout))
            s_t = gl.zeros([1, W, 32], gl.float32, gl.SliceLayout(3, layout))
            for t in gl.static_range(3):
                if s == t:
                    mbarrier.wait(bars[t], (i // 3) & 1)
                    for c in gl.static_range(NB):
                        x = boxes[t * NB + c].reshape([1, W, 32, 8]).load(layout).to(gl.float32)
                        x = gl.where(_vec_inside(c, vec, sh, N), x, float("-inf"))
                        m_new = gl.maximum(m_t, gl.max(x, axis=3))
                        m_use = gl.where(m_new == float("-inf"), 0.0, m_new)
                        s_t = s_t * gl.exp2((m_t - m_use) * _LOG2E) + gl.sum(
                            gl.exp2((x - m_use[:, :, :, None]) * _LOG2E), axis=3)
                        m_t = m_new
            m = gl.maximum(gl.max(gl.max(gl.max(m_t, axis=2), axis=1), axis=0), gl.max(gl.max(x_e, axis=1), axis=0))
            total = gl.sum(gl.sum(gl.sum(s_t * gl.exp2((m_t - m) * _LOG2E), axis=2), axis=1), axis=0)
            l_sum = gl.log2(total + gl.sum(gl.sum(gl.exp2((x_e - m) * _LOG2E), axis=1), axis=0))
            for t in gl.static_range(3):
                if s == t:
                    for c in gl.static_range(NB):
                        x = boxes[t * NB + c].reshape([1, W, 32, 8]).load(layout).to(gl.float32)
                        y = gl.exp2((x - m) * _LOG2E - l_sum).to(y_ptr.dtype.element_ty)
                        gl.store(y_ptr + base + offs + c * W * _LANES, y, mask=_vec_inside(c, vec, sh, N))
        else:  # the last row, ending inside a partial box row: from global memory alone (its copy is waited on)
            for t in gl.static_range(3):
                if s == t:
                    mbarrier.wait(bars[t], (i // 3) & 1)
            m_t = gl.full([1, W, 32], float("-inf"), gl.float32, gl.SliceLayout(3, layout))
            for c in range(0, N + _LANES, W * _LANES):
                at = base + c + offs
                x = gl.load(x_ptr + at, mask=(at >= start) & (at < start + N), other=float("-inf")).to(gl.float32)
                m_t = gl.maximum(m_t, gl.max(x, axis=3))
            m = gl.max(gl.max(gl.max(m_t, axis=2), axis=1), axis=0)
            s_t = gl.zeros([1, W, 32], gl.float32, gl.SliceLayout(3, layout))
            for c in range(0, N + _LANES, W * _LANES):
                at = base + c + offs
                x = gl.load(x_ptr + at, mask=(at >= start) & (at < start + N), other=float("-inf")).to(gl.float32)
                s_t += gl.sum(gl.exp2((x - m) * _LOG2E), axis=3)
            l_sum = gl.log2(gl.sum(gl.sum(gl.sum(s_t, axis=2), axis=1), axis=0))
            for c in range(0, N + _LANES, W * _LANES):
                at = base + c + offs
                inside = (at >= start) & (at < start + N)
                x = gl.load(x_ptr + at, mask=inside, other=float("-inf")).to(gl.float32)
                gl.store(y_ptr + at, gl.exp2((x - m) * _LOG2E - l_sum).to(y_ptr.dtype.element_ty), mask=inside)
        gl.store(y_ptr + e_offs, gl.exp2((x_e - m) * _LOG2E - l_sum).to(y_ptr.dtype.element_ty), mask=e_mask)
        it += 1
    # The copies still in flight (rows past the last: arrivals) complete before the CTA leaves.
    for t in gl.static_range(3):
        if it % 3 == t:
            mbarrier.wait(bars[t], (it // 3) & 1)
        if (it + 1) % 3 == t:
            mbarrier.wait(bars[t], ((it + 1) // 3) & 1)


def tma_flat_rows(x: torch.Tensor, y: torch.Tensor, warps: int, ctas: int) -> object:
    """Softmax of x's rows (16-bit, contiguous, any width of 256 or more) into y (contiguous, same shape), a row per
    CTA at a time on `ctas` persistent CTAs, each row's copy in TMA boxes of `warps` box rows of the flat view."""
    m, n = x.shape
    if x.element_size() != 2 or not x.is_contiguous() or not y.is_contiguous() or n < LANES:
        raise ValueError(f"the flat TMA view needs contiguous 16-bit rows of {LANES} or more, not {tuple(x.shape)}")
    if x.data_ptr() % 16 or y.data_ptr() % 16:
        raise ValueError("the flat TMA view needs x and y on 16-byte boundaries")
    reach = -(-(n + LANES - 1) // LANES)  # box rows a row's run can touch
    nb = -(-reach // warps)  # boxes of `warps` box rows covering it
    if 3 * nb * warps * LANES * 2 > 227 * 1024:
        raise ValueError(f"rows of {n} do not fit three slots of {nb} boxes of {warps} box rows")
    whole = m * n // LANES  # whole box rows of the flat view; the copies reach no further
    full = m if m * n % LANES == 0 else m - 1  # rows copied by TMA; a last row ending in a partial box row is not
    layout = gl.NVMMASharedLayout(swizzle_byte_width=0, element_bitwidth=16, rank=3)
    desc = TensorDescriptor(x, [1, whole, LANES], [whole * LANES, LANES, 1], [1, warps, LANES], layout)
    return _softmax_tma_flat[(ctas,)](desc, x, y, m, n, full, NB=nb, num_warps=warps)
