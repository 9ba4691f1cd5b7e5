"""Wide softmax rows held in shared memory, written in Gluon (Triton's explicit-layout dialect), swept by
kernel_sweep.py (family `softmax_resident`) against the shipped plan on the H200; shipped only if it wins there.

Every wide-row design in Triton proper stops near 70% of copy bandwidth (benchmarks/NOTES.md): a row that does not fit
one program's registers is either split across programs that must meet (split path) or read twice (staged, looped),
and in each a program loads, reduces, then stores, with nothing in flight meanwhile. Here one persistent program per
SM keeps its whole row in shared memory, filled by asynchronous copies (`cp.async`, no registers held while they fly):
  * stats pass: chunk c is reduced as soon as its copy group lands (a per-thread running max and sum of exponentials,
    so a chunk costs one exp per element and no cross-thread traffic; one CTA-wide reduction per row);
  * output pass: chunk c is read back from shared memory, normalised and stored, and its slot immediately refilled
    with the *next* row's chunk c, so the next row's reads are in flight while this row's output is written.
HBM sees one read and one write, and each SM always has up to a row (128 KB at 65536 bf16) of loads outstanding.
Rows larger than the shared-memory budget keep their first chunks resident and stream the rest (read from HBM in the
stats pass with `evict_last`, re-read from L2 in the output pass).

Each thread reads back exactly the elements its own copies wrote (same distributed layout), so the only ordering
needed is `cp.async.wait_group`; Triton's shared-memory barrier analysis adds the CTA barriers it wants on top.
Gluon compiles for the GPU only: there is no interpreter path (the shipped kernels keep theirs).
"""

from __future__ import annotations

import torch
import triton
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.ampere import async_copy as cp

from kernelproof_core.kernels import softmax

_LOG2E = gl.constexpr(1.4426950408889634)
SMEM_BUDGET_BYTES = 200 * 1024  # of the H200's 227 KB per block: room for the reductions' scratch


@gluon.jit
def _slot(buf_a: gl.shared_memory_descriptor, buf_b: gl.shared_memory_descriptor, c: gl.constexpr,
          RES_A: gl.constexpr, T: gl.constexpr) -> gl.shared_memory_descriptor:
    # Chunk c's slot: the first RES_A chunks live in buf_a, the next ones in buf_b (allocations must be powers of two).
    if c < RES_A:
        return buf_a.slice(c * T, T)
    else:
        return buf_b.slice((c - RES_A) * T, T)


@gluon.jit
def _softmax_resident(x_ptr, y_ptr, M, N, stride_x, NCHUNK: gl.constexpr, RES_A: gl.constexpr,
                      RES_B: gl.constexpr, K: gl.constexpr, ALIGN: gl.constexpr):
    W: gl.constexpr = gl.num_warps()
    T: gl.constexpr = 32 * W  # threads; a chunk is T x K elements, K contiguous ones per thread
    CHUNK: gl.constexpr = T * K
    NRES: gl.constexpr = RES_A + RES_B
    layout: gl.constexpr = gl.BlockedLayout([1, K], [32, 1], [W, 1], [1, 0])
    rows_layout: gl.constexpr = gl.SliceLayout(1, layout)
    smem_layout: gl.constexpr = gl.SwizzledSharedLayout(1, 1, 1, [1, 0])
    buf_a = gl.allocate_shared_memory(x_ptr.dtype.element_ty, [RES_A * T, K], smem_layout)
    buf_b = gl.allocate_shared_memory(x_ptr.dtype.element_ty, [max(RES_B, 1) * T, K], smem_layout)
    N = (N // ALIGN) * ALIGN
    stride_x = (stride_x // ALIGN) * ALIGN
    offs = (gl.arange(0, T, layout=rows_layout) * K)[:, None] + gl.arange(0, K, layout=gl.SliceLayout(0, layout))[
        None, :]
    step = gl.num_programs(0)
    row = gl.program_id(0)
    for c in gl.static_range(NRES):
        cols = c * CHUNK + offs
        cp.async_copy_global_to_shared(_slot(buf_a, buf_b, c, RES_A, T), x_ptr + row.to(gl.int64) * stride_x + cols,
                                       mask=(cols < N) & (row < M))
        cp.commit_group()
    while row < M:
        x_row = x_ptr + row.to(gl.int64) * stride_x
        m_t = gl.full([T], float("-inf"), gl.float32, rows_layout)
        s_t = gl.zeros([T], gl.float32, rows_layout)
        for c in gl.static_range(NCHUNK):
            cols = c * CHUNK + offs
            if c < NRES:
                cp.wait_group(NRES - 1 - c)  # groups land in order: chunk c's is done
                x = _slot(buf_a, buf_b, c, RES_A, T).load(layout).to(gl.float32)
                x = gl.where(cols < N, x, float("-inf"))  # masked copies zero-fill
            else:
                x = gl.load(x_row + cols, mask=cols < N, other=float("-inf"),
                            eviction_policy="evict_last").to(gl.float32)
            m_new = gl.maximum(m_t, gl.max(x, axis=1))
            m_safe = gl.where(m_new == float("-inf"), 0.0, m_new) * _LOG2E  # all -inf so far: (max=-inf, sum=0)
            s_t = s_t * gl.exp2(m_t * _LOG2E - m_safe) + gl.sum(gl.exp2(x * _LOG2E - m_safe[:, None]), axis=1)
            m_t = m_new
        m2 = gl.max(m_t, axis=0) * _LOG2E
        inv = 1.0 / gl.sum(s_t * gl.exp2(m_t * _LOG2E - m2), axis=0)
        y_row = y_ptr + row.to(gl.int64) * N
        ahead = row + step
        a_row = x_ptr + ahead.to(gl.int64) * stride_x
        for c in gl.static_range(NCHUNK):
            cols = c * CHUNK + offs
            if c < NRES:
                x = _slot(buf_a, buf_b, c, RES_A, T).load(layout).to(gl.float32)
            else:
                x = gl.load(x_row + cols, mask=cols < N, other=0.0, eviction_policy="evict_first").to(gl.float32)
            gl.store(y_row + cols, (gl.exp2(x * _LOG2E - m2) * inv).to(y_ptr.dtype.element_ty), mask=cols < N)
            if c < NRES:  # the slot is free: start the next row's chunk c (past the last row: no traffic)
                cp.async_copy_global_to_shared(_slot(buf_a, buf_b, c, RES_A, T), a_row + cols,
                                               mask=(cols < N) & (ahead < M))
                cp.commit_group()
        row = ahead
    cp.wait_group(0)


def resident_chunks(n_chunks: int, chunk_bytes: int, budget_bytes: int) -> tuple[int, int]:
    """(RES_A, RES_B): resident chunk slots split into two power-of-two buffers within the shared-memory budget."""
    fit = min(n_chunks, budget_bytes // chunk_bytes)
    if fit < 1:
        raise ValueError(f"a {chunk_bytes}-byte chunk does not fit {budget_bytes} bytes of shared memory")
    a = 1 << (fit.bit_length() - 1)
    rest = fit - a
    b = 1 << (rest.bit_length() - 1) if rest else 0
    return a, b


def softmax_resident(x: torch.Tensor, y: torch.Tensor, warps: int, k: int, programs_per_sm: int = 1,
                     budget_bytes: int = SMEM_BUDGET_BYTES) -> object:
    """Launch _softmax_resident on x (m x n, unit column stride, rows aligned to 4 bytes) into contiguous y: one
    program per SM (or programs_per_sm, each with its share of the budget), chunks of 32 x warps x k elements.
    Returns the compiled kernel (kernel_sweep.py reports its registers and spills)."""
    m, n = x.shape
    es = x.element_size()
    align = softmax._align(es, n, x.stride(0))
    if align * es < 4:
        raise ValueError("cp.async copies at least 4 bytes: rows must be 4-byte aligned")
    chunk = 32 * warps * k
    n_chunks = triton.cdiv(n, chunk)
    res_a, res_b = resident_chunks(n_chunks, chunk * es, budget_bytes // programs_per_sm)
    grid = (min(m, programs_per_sm * softmax._num_sms(x.device)),)
    return _softmax_resident[grid](x, y, m, n, x.stride(0), NCHUNK=n_chunks, RES_A=res_a, RES_B=res_b, K=k,
                                   ALIGN=align, num_warps=warps)
