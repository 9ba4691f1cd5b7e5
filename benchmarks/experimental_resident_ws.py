"""Experiment, not shipped: the resident softmax kernel split into a producer warp and consumer warps (Gluon
`warp_specialize`), so that no copy wait stalls the whole CTA.

Why: the shipped resident kernel (kernelproof_core/kernels/softmax.py) stops at 81-84% of copy bandwidth on 40000-65536
wide rows. Its SASS has a CTA-wide `bar.sync` after every `cp.async.wait_group` and between each slot's read and its
refill (Triton's membar pass cannot see that each thread reads back only its own copies), so every warp waits for the
slowest copy, and fusing the next row's statistics into the output pass measured worse at every lag
(evidence/h200/2026-12-01_fused_rows/). Here one producer warp issues every copy (`cp.async` into a slot, then
`cp.async.mbarrier.arrive.noinc` on the slot's `full` barrier: 32 arrivals, one per producer thread, each once its
own copies have landed) and refills a slot as soon as the consumers release it (their `empty` barrier: one arrival,
made by one consumer thread after a partition-wide barrier, as Gluon lowers `mbarrier.arrive`). The consumers (the
default partition) wait on `full`, run the stats pass, then the output pass, releasing each slot once read. The
consumers' own barriers only sync the consumer warps and never wait for memory.

Phases: `full[c]` completes once per row; the consumers wait for parity (row count & 1). The producer waits on
`empty[c]` for parity (row count & 1) ^ 1, which a fresh barrier satisfies at once (its previous phase counts as
complete), so the first row's copies start without waiting. Rows must fit the shared-memory budget (no streamed
chunks). Timed by `kernel_sweep.py --only softmax_resident_ws` (run it under a time box, KP_TIMEOUT_SWEEP: a
wrong barrier count would hang the kernel). Measured on the H200 (evidence/h200/2026-12-01_window_parts/1_*): correct,
and slower than the shipped kernel at every config (40000 wide: 72.8% of copy at best against 83.2%; 65536: 79.8%
against 81.4%); benchmarks/NOTES.md has the reading.
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import partial

import torch
from resident_common import _resident_chunks, _row_shift, _running_stats, _slot
from sweep_common import Trial
from sweep_resident import _correct, inputs
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.ampere import async_copy as cp
from triton.experimental.gluon.language.nvidia.ampere import mbarrier

from kernelproof_core.kernels import softmax
from kernelproof_core.kernels.softmax import _LOG2E

PRODUCER_REGS = gl.constexpr(48)  # registers per producer thread: addresses and a mask only


@gluon.jit
def _producer(x_ptr: gl.tensor, M: gl.tensor, N: gl.tensor, stride_x: gl.tensor, buf_a: gl.shared_memory_descriptor,
              buf_b: gl.shared_memory_descriptor, full: gl.shared_memory_descriptor,
              empty: gl.shared_memory_descriptor, NCHUNK: gl.constexpr, RES_A: gl.constexpr, T: gl.constexpr,
              K: gl.constexpr) -> None:
    layout: gl.constexpr = gl.BlockedLayout([1, K], [32, 1], [1, 1], [1, 0])
    offs = (gl.arange(0, T, layout=gl.SliceLayout(1, layout)) * K)[:, None] + gl.arange(
        0, K, layout=gl.SliceLayout(0, layout))[None, :]
    row = gl.program_id(0)
    step = gl.num_programs(0)
    it = 0
    while row < M:
        x_row = x_ptr + row.to(gl.int64) * stride_x
        for c in gl.static_range(NCHUNK):
            mbarrier.wait(empty.index(c), (it & 1) ^ 1)  # the consumers have read this slot's last row
            cols = c * T * K + offs
            if c == NCHUNK - 1:
                cp.async_copy_global_to_shared(_slot(buf_a, buf_b, c, RES_A, T), x_row + cols, mask=cols < N)
            else:
                cp.async_copy_global_to_shared(_slot(buf_a, buf_b, c, RES_A, T), x_row + cols)
            cp.mbarrier_arrive(full.index(c), increment_count=False)
        row += step
        it += 1


@gluon.jit
def _consumer(y_ptr: gl.tensor, M: gl.tensor, N: gl.tensor, buf_a: gl.shared_memory_descriptor,
              buf_b: gl.shared_memory_descriptor, full: gl.shared_memory_descriptor,
              empty: gl.shared_memory_descriptor, NCHUNK: gl.constexpr, RES_A: gl.constexpr, T: gl.constexpr,
              K: gl.constexpr) -> None:
    W: gl.constexpr = gl.num_warps()
    layout: gl.constexpr = gl.BlockedLayout([T // (32 * W), K], [32, 1], [W, 1], [1, 0])
    rows_layout: gl.constexpr = gl.SliceLayout(1, layout)
    offs = (gl.arange(0, T, layout=rows_layout) * K)[:, None] + gl.arange(
        0, K, layout=gl.SliceLayout(0, layout))[None, :]
    row = gl.program_id(0)
    step = gl.num_programs(0)
    it = 0
    while row < M:
        m_t = gl.full([T], float("-inf"), gl.float32, rows_layout)
        s_t = gl.zeros([T], gl.float32, rows_layout)
        for c in gl.static_range(NCHUNK):
            mbarrier.wait(full.index(c), it & 1)
            x = _slot(buf_a, buf_b, c, RES_A, T).load(layout).to(gl.float32)
            if c == NCHUNK - 1:
                x = gl.where(c * T * K + offs < N, x, float("-inf"))  # masked copies zero-fill
            m_t, s_t = _running_stats(m_t, s_t, x)
        shift = _row_shift(m_t, s_t)
        y_row = y_ptr + row.to(gl.int64) * N
        for c in gl.static_range(NCHUNK):
            x = _slot(buf_a, buf_b, c, RES_A, T).load(layout).to(gl.float32)
            mbarrier.arrive(empty.index(c))  # the slot is free for the producer's next row
            y = gl.exp2(x * _LOG2E - shift).to(y_ptr.dtype.element_ty)
            cols = c * T * K + offs
            if c == NCHUNK - 1:
                gl.store(y_row + cols, y, mask=cols < N)
            else:
                gl.store(y_row + cols, y)
        row += step
        it += 1


@gluon.jit
def _softmax_resident_ws(x_ptr: gl.tensor, y_ptr: gl.tensor, M: gl.tensor, N: gl.tensor, stride_x: gl.tensor,
                         NCHUNK: gl.constexpr, RES_A: gl.constexpr, RES_B: gl.constexpr, NBAR: gl.constexpr,
                         T: gl.constexpr, K: gl.constexpr) -> None:
    # Allocations are powers of two: the row's slots in two buffers (as the shipped kernel), barriers padded.
    smem_layout: gl.constexpr = gl.SwizzledSharedLayout(1, 1, 1, [1, 0])
    buf_a = gl.allocate_shared_memory(x_ptr.dtype.element_ty, [RES_A * T, K], smem_layout)
    buf_b = gl.allocate_shared_memory(x_ptr.dtype.element_ty, [max(RES_B, 1) * T, K], smem_layout)
    full = gl.allocate_shared_memory(gl.int64, [NBAR, 1], mbarrier.MBarrierLayout())
    empty = gl.allocate_shared_memory(gl.int64, [NBAR, 1], mbarrier.MBarrierLayout())
    for c in gl.static_range(NCHUNK):
        mbarrier.init(full.index(c), count=32)  # one noinc arrival per producer thread
        mbarrier.init(empty.index(c), count=1)  # Gluon's arrive: one thread, after a consumer-wide barrier
    gl.warp_specialize([(_consumer, (y_ptr, M, N, buf_a, buf_b, full, empty, NCHUNK, RES_A, T, K)),
                        (_producer, (x_ptr, M, N, stride_x, buf_a, buf_b, full, empty, NCHUNK, RES_A, T, K))], [1],
                       [PRODUCER_REGS])


def launch(x: torch.Tensor, y: torch.Tensor, programs: int, warps: int, chunk_rows: int = 512) -> object:
    """Softmax of a 2-D 16-bit x (rows and stride multiples of 8 elements, rows within the shared-memory budget)
    into y on `programs` persistent programs of `warps` consumer warps plus one producer warp; returns the kernel."""
    m, n = x.shape
    k = 16 // x.element_size()
    n_chunks = -(-n // (chunk_rows * k))
    res_a, res_b = _resident_chunks(n_chunks, chunk_rows * k * x.element_size(), 1 << 30)
    if res_a + res_b < n_chunks:
        raise ValueError(f"{n_chunks} chunks do not split into two power-of-two buffers")
    return _softmax_resident_ws[(min(m, programs),)](x, y, m, n, x.stride(0), NCHUNK=n_chunks, RES_A=res_a,
                                                      RES_B=res_b, NBAR=1 << (n_chunks - 1).bit_length(),
                                                      T=chunk_rows, K=k, num_warps=warps)


def softmax_resident_ws_trials(device: torch.device, dtype: torch.dtype) -> Iterator[Trial]:
    """kernel_sweep.py family `softmax_resident_ws`: the warp-specialised kernel over consumer warps and programs per
    SM, each config checked against fp32 before it is timed, beside the built-in's planned launch (the shipped
    resident kernel) on the same input. Rows over the shared-memory budget are left out (no streamed chunks)."""
    sms, smem = softmax._num_sms(device), softmax._smem_per_sm(softmax._cuda_index(device))
    budget = softmax._resident_budget(smem)
    for m, n in ((1024, 40000), (1024, 65536), (683, 98304)):
        x, y, ref, moved = inputs(m, n, dtype, device)
        yield ("softmax.planned", (m, n), "planned", partial(softmax.candidate, x), moved, True)
        for warps, per_sm in ((8, 2), (16, 2), (8, 1), (16, 1)):  # 32 + 1 warps exceed a CTA
            row_bytes = -(-n // 4096) * 4096 * x.element_size()  # whole 512 x 8 chunks
            if per_sm * row_bytes > budget:
                continue
            label = f"warps={warps}+1 per_sm={per_sm}"
            run = partial(launch, x, y, per_sm * sms, warps)
            y.fill_(float("nan"))
            run()
            if _correct(y, ref, f"softmax.resident_ws {m}x{n} {label}"):
                yield ("softmax.resident_ws", (m, n), label, run, moved, False)
