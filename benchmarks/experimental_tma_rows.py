"""Softmax rows copied into shared memory by TMA, three rows deep on one SM (a control of sweep family
`softmax_pipeline_local`; built and compiled for sm_90, to be measured on the H200 before any of it ships).

Why (benchmarks/NOTES.md, `Parts in shared memory over a cluster`): the same three-deep pipeline fed by cp.async
measured 67.9% of copy at 2048 x 32768 where the register plan reaches 91.6%. cp.async costs every thread an
instruction per 16 bytes and a wait plus a CTA barrier per chunk; a TMA copy costs one thread one instruction per
row (or per box) and completes on an mbarrier that the readers wait on once. If this form runs near copy speed where
cp.async does not, the wide rows' next design is TMA-fed; if it does not, shared-memory pipelines are not the lever.

Rows are viewed as [M, N / 256, 256] (TMA boxes are at most 256 elements a dimension) so that one box carries a
whole 32768-wide row; rows must be 16-byte aligned and N a multiple of 256 (TMA does not realign). Rows past the
last are not copied: a plain arrival completes their slot's barrier phase, so every slot's phase advances once an
iteration whatever the row count.
"""

from __future__ import annotations

import torch
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import fence_async_shared, mbarrier, tma
from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

_LOG2E = gl.constexpr(1.4426950408889634)
LANES = 256  # the inner box dimension: a row is N / 256 box rows of 256 elements
_LANES = gl.constexpr(LANES)


@gluon.constexpr_function
def _layout(warps: int) -> gl.BlockedLayout:
    # [1, W, 256]: a warp reads one 256-element box row, 8 contiguous elements (16 bytes) a thread.
    return gl.BlockedLayout([1, 1, 8], [1, 1, 32], [1, warps, 1], [2, 1, 0])


@gluon.jit
def _issue(desc: gl.tensor, slot: gl.tensor, bar: gl.tensor, row: gl.tensor, M: gl.tensor, R: gl.constexpr,
           BOXES: gl.constexpr) -> None:
    # Every thread has finished reading this slot (the caller's barrier); the copies land in the async proxy. A row
    # past the last is not copied; a plain arrival completes the barrier's phase instead, so that every slot's phase
    # advances once an iteration whatever the row count.
    live = row < M
    fence_async_shared()
    mbarrier.expect(bar, R * _LANES * desc.dtype.primitive_bitwidth // 8, pred=live)
    for b in gl.static_range(BOXES):
        tma.async_copy_global_to_shared(desc, [row, b * (R // BOXES), 0], bar,
                                        slot.slice(b * (R // BOXES), R // BOXES, dim=1), pred=live)
    mbarrier.arrive(bar, pred=row >= M)


@gluon.jit
def _stats(slot: gl.tensor, bar: gl.tensor, phase: gl.tensor, R: gl.constexpr,
           layout: gl.constexpr) -> tuple[gl.tensor, gl.tensor]:
    # The row's max (0 for an empty row, the shift) and log2 of its sum of 2^((x - max) log2 e): per-thread running
    # values over the row's R / W slices, one CTA-wide reduction at the end.
    W: gl.constexpr = gl.num_warps()
    mbarrier.wait(bar, phase)
    m_t = gl.full([1, W], float("-inf"), gl.float32, gl.SliceLayout(2, layout))
    s_t = gl.zeros([1, W], gl.float32, gl.SliceLayout(2, layout))
    for c in gl.static_range(R // W):
        x = slot.slice(c * W, W, dim=1).load(layout).to(gl.float32)
        m_new = gl.maximum(m_t, gl.max(x, axis=2))
        s_t = s_t * gl.exp2((m_t - m_new) * _LOG2E) + gl.sum(gl.exp2((x - m_new[:, :, None]) * _LOG2E), axis=2)
        m_t = m_new
    m = gl.max(gl.max(m_t, axis=1), axis=0)
    m = gl.where(m == float("-inf"), 0.0, m)
    return m, gl.log2(gl.sum(gl.sum(s_t * gl.exp2((m_t - m) * _LOG2E), axis=1), axis=0))


@gluon.jit
def _step(desc: gl.tensor, slots: gl.tuple, bars: gl.tuple, OUT: gl.constexpr, STATS: gl.constexpr,
          COPY: gl.constexpr, phase: gl.tensor, row: gl.tensor, n_prog: gl.tensor, y_ptr: gl.tensor, M: gl.tensor,
          stride_y: gl.tensor, offs: gl.tensor, m: gl.tensor, l_sum: gl.tensor, R: gl.constexpr,
          BOXES: gl.constexpr, layout: gl.constexpr) -> tuple[gl.tensor, gl.tensor]:
    # Row row + 2 n_prog copied into set COPY (last step's output set, so after a CTA barrier), row + n_prog's
    # stats from set STATS (its barrier's phase `phase`), then row's output from set OUT with its stats m, l_sum.
    W: gl.constexpr = gl.num_warps()
    gl.thread_barrier()
    _issue(desc, slots[COPY], bars[COPY], row + 2 * n_prog, M, R, BOXES)
    m1, l1 = _stats(slots[STATS], bars[STATS], phase, R, layout)
    if row < M:
        y_row = y_ptr + row.to(gl.int64) * stride_y
        for c in gl.static_range(R // W):
            x = slots[OUT].slice(c * W, W, dim=1).load(layout).to(gl.float32)
            y = gl.exp2((x - m) * _LOG2E - l_sum)
            gl.store(y_row + offs + c * W * _LANES, y.to(y_ptr.dtype.element_ty))
    return m1, l1


@gluon.jit
def _softmax_tma_rows(desc: gl.tensor, y_ptr: gl.tensor, M: gl.tensor, stride_y: gl.tensor, R: gl.constexpr,
                      BOXES: gl.constexpr) -> None:
    W: gl.constexpr = gl.num_warps()
    layout: gl.constexpr = _layout(W)
    slots = ()
    bars = ()
    for _ in gl.static_range(3):
        slots = slots + (gl.allocate_shared_memory(desc.dtype, [1, R, _LANES], desc.layout),)  # noqa: RUF005
        bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
        mbarrier.init(bar, count=1)
        bars = bars + (bar,)  # noqa: RUF005
    fence_async_shared()
    w = gl.arange(0, W, layout=gl.SliceLayout(0, gl.SliceLayout(2, layout)))
    k = gl.arange(0, _LANES, layout=gl.SliceLayout(0, gl.SliceLayout(1, layout)))
    offs = w[None, :, None] * _LANES + k[None, None, :]  # slice c of a row: offs + c W 256
    pid = gl.program_id(0)
    n_prog = gl.num_programs(0)
    _issue(desc, slots[0], bars[0], pid, M, R, BOXES)
    _issue(desc, slots[1], bars[1], pid + n_prog, M, R, BOXES)
    m, l_sum = _stats(slots[0], bars[0], 0, R, layout)
    it = 0
    # Slot uses: 0 and 1 once before the loop; in iteration i, slot 2 (step A), 0 (B), 1 (C). So A waits slot 1's
    # use i, B slot 2's use i, C slot 0's use i + 1: phases i & 1, i & 1, (i + 1) & 1.
    for row in range(pid, M, 3 * n_prog):
        p = it & 1
        m, l_sum = _step(desc, slots, bars, 0, 1, 2, p, row, n_prog, y_ptr, M, stride_y, offs, m, l_sum, R, BOXES,
                         layout)
        m, l_sum = _step(desc, slots, bars, 1, 2, 0, p, row + n_prog, n_prog, y_ptr, M, stride_y, offs, m, l_sum,
                         R, BOXES, layout)
        m, l_sum = _step(desc, slots, bars, 2, 0, 1, p ^ 1, row + 2 * n_prog, n_prog, y_ptr, M, stride_y, offs, m,
                         l_sum, R, BOXES, layout)
        it += 1
    mbarrier.wait(bars[1], it & 1)  # slot 1's last phase (a copy or an arrival) completes before the CTA leaves


def tma_rows(x: torch.Tensor, y: torch.Tensor, warps: int, ctas: int, boxes: int = 1) -> object:
    """Softmax of x's rows (16-bit, N a multiple of 256 and at most 65536, rows 16-byte aligned) into y (same shape,
    unit column stride) on `ctas` persistent CTAs, each row copied by `boxes` TMA boxes."""
    m, n = x.shape
    if x.element_size() != 2 or n % LANES or n // LANES > 256 or x.stride(1) != 1 or y.stride(1) != 1:
        raise ValueError(f"TMA rows need 16-bit rows of a multiple of 256 elements up to 65536, not {tuple(x.shape)}")
    r = n // LANES
    if r % boxes or (r // boxes) % warps:
        raise ValueError(f"{r} box rows do not split into {boxes} boxes of whole {warps}-row slices")
    layout = gl.NVMMASharedLayout(swizzle_byte_width=0, element_bitwidth=16, rank=3)
    desc = TensorDescriptor(x, [m, r, LANES], [x.stride(0), LANES, 1], [1, r // boxes, LANES], layout)
    return _softmax_tma_rows[(ctas,)](desc, y, m, y.stride(0), R=r, BOXES=boxes, num_warps=warps)
