"""Built-in softmax candidate: row-wise softmax over the last dim; max-subtracted, FP32 exp and sum.

Softmax is memory-bound, so each path is chosen to touch HBM as few times as possible:
  * N <= 32768: a row fits in registers, so one read and one write. Narrow rows are packed several to a
    program (a 2-D tile of about 8192 elements) so short rows still give each program real work.
  * N > 32768 and many rows: a persistent program per SM (or two) loops over its rows, each in chunks,
    twice. Pass 1 keeps a per-lane running (max, sum) with a single exp per element and no barriers;
    pass 2 re-reads the row from L2, because the grid is sized so that the rows in flight fit in L2.
  * N > 32768 with few rows: a row is split over several programs (partial (max, sum) per chunk, then a
    second kernel merges the partials and normalises its chunk); one program per row would idle most SMs.
Masked lanes read -inf, so they vanish from both the max and the sum. Configs come from a fixed heuristic,
not autotuning: the first call is cheap and every run picks the same kernels. Reductions have a fixed
order, so the output is bit-for-bit deterministic.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import NamedTuple

import torch
import triton
import triton.language as tl

_MAX_FUSED_N = 32768  # widest row held in registers (32 fp32 values per thread at 32 warps)
_TILE = 8192  # elements per program for the fused path
_SPLIT_MIN_CHUNK, _SPLIT_MAX_CHUNK = 2048, 16384
# Looped path: rows in flight stay within this much L2 (H200: 50 MB), so pass 2 re-reads hit L2; and a
# persistent grid is used only if no program does more than this times the mean work.
_L2_BUDGET_BYTES = 32 << 20
_MAX_IMBALANCE = 1.25
_WAVES = 2  # shrink tiles until the grid covers this many programs per SM
_LOWEST_FP32: tl.constexpr = tl.constexpr(-3.4028234663852886e38)
_CPU_SMS = 132  # H200 SM count; used only to size grids when there is no CUDA device (interpreter)


@functools.cache
def _cuda_sms(index: int) -> int:
    return int(torch.cuda.get_device_properties(index).multi_processor_count)


def _num_sms(device: torch.device) -> int:
    if device.type == "cuda":
        return _cuda_sms(device.index if device.index is not None else torch.cuda.current_device())
    return _CPU_SMS


def _align(elsize: int, *values: int) -> int:
    """Largest power of two (at most one 16-byte vector) that divides every value, in elements."""
    a = max(1, 16 // elsize)
    while a > 1 and any(v % a for v in values):
        a //= 2
    return a


def _warps(tile: int) -> int:
    """About 32 elements per thread: enough loads in flight, few enough registers to never spill."""
    return min(32, max(4, tile // 1024))


@triton.jit
def _softmax_rows(x_ptr: tl.tensor, y_ptr: tl.tensor, M: tl.tensor, N: tl.tensor, stride_x: tl.tensor,
                  BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, ALIGN: tl.constexpr) -> None:
    # The host guarantees ALIGN divides N and the row stride; spelling that out lets the compiler vectorise
    # the masked accesses even when N is not a multiple of 16.
    N = (N // ALIGN) * ALIGN
    stride_x = (stride_x // ALIGN) * ALIGN
    row0 = tl.program_id(0).to(tl.int64) * BLOCK_M
    # Rows past the end re-read the last row (harmless, cached) so no row is all -inf and loads need only the
    # column mask.
    rows = tl.minimum(tl.arange(0, BLOCK_M), (M - 1 - row0).to(tl.int32))
    cols = tl.arange(0, BLOCK_N)
    col_mask = cols < N
    x = tl.load(x_ptr + row0 * stride_x + rows[:, None] * stride_x + cols[None, :], mask=col_mask[None, :],
                other=float("-inf")).to(tl.float32)
    e = tl.exp(x - tl.max(x, axis=1)[:, None])
    y = e * (1.0 / tl.sum(e, axis=1))[:, None]
    store_mask = (tl.arange(0, BLOCK_M) < M - row0)[:, None] & col_mask[None, :]
    y_ptrs = y_ptr + row0 * N + rows[:, None] * N + cols[None, :]
    tl.store(y_ptrs, y.to(y_ptr.dtype.element_ty), mask=store_mask)


@triton.jit
def _softmax_looped(x_ptr: tl.tensor, y_ptr: tl.tensor, M: tl.tensor, N: tl.tensor, stride_x: tl.tensor,
                    CHUNK: tl.constexpr, ALIGN: tl.constexpr) -> None:
    # Persistent over rows: the host launches only as many programs as keeps the rows in flight within L2,
    # so pass 2 re-reads each row from L2 instead of HBM.
    N = (N // ALIGN) * ALIGN
    stride_x = (stride_x // ALIGN) * ALIGN
    cols = tl.arange(0, CHUNK)
    # while, not range(): Triton 3.6's interpreter cannot iterate range() over a runtime bound under
    # NumPy 2.x, and the compiled loop is the same.
    row = tl.program_id(0)
    while row < M:
        x_row = x_ptr + row.to(tl.int64) * stride_x
        y_row = y_ptr + row.to(tl.int64) * N
        # Per-lane running max and sum of exp(x - max). The max starts at the lowest finite float, not
        # -inf, so x - m_vec is never -inf - -inf (NaN) and -inf entries simply add exp(-inf) = 0.
        m_vec = tl.full((CHUNK,), _LOWEST_FP32, dtype=tl.float32)
        s_vec = tl.zeros((CHUNK,), dtype=tl.float32)
        start = 0
        while start < N:
            x = tl.load(x_row + start + cols, mask=start + cols < N, other=float("-inf")).to(tl.float32)
            # One exp per element: exp(-|x - m|) is the rescale factor if x is a new max, else x's term.
            d = x - m_vec
            e = tl.exp(-tl.abs(d))
            s_vec = tl.where(d > 0, s_vec * e + 1.0, s_vec + e)
            m_vec = tl.maximum(m_vec, x)
            start += CHUNK
        m = tl.max(m_vec, axis=0)
        inv = 1.0 / tl.sum(s_vec * tl.exp(m_vec - m), axis=0)
        start = 0
        while start < N:
            mask = start + cols < N
            x = tl.load(x_row + start + cols, mask=mask, other=float("-inf")).to(tl.float32)
            tl.store(y_row + start + cols, (tl.exp(x - m) * inv).to(y_ptr.dtype.element_ty), mask=mask)
            start += CHUNK
        row += tl.num_programs(0)


@triton.jit
def _softmax_partials(x_ptr: tl.tensor, part_ptr: tl.tensor, M: tl.tensor, N: tl.tensor, stride_x: tl.tensor,
                      n_chunks: tl.tensor, CHUNK: tl.constexpr, ALIGN: tl.constexpr) -> None:
    N = (N // ALIGN) * ALIGN
    stride_x = (stride_x // ALIGN) * ALIGN
    chunk = tl.program_id(0)
    row = tl.program_id(1).to(tl.int64)
    cols = chunk * CHUNK + tl.arange(0, CHUNK)
    x = tl.load(x_ptr + row * stride_x + cols, mask=cols < N, other=float("-inf")).to(tl.float32)
    m = tl.max(x, axis=0)
    m_safe = tl.where(m == float("-inf"), 0.0, m)  # an all -inf chunk contributes (max=-inf, sum=0)
    s = tl.sum(tl.exp(x - m_safe), axis=0)
    slot = row * n_chunks + chunk
    tl.store(part_ptr + slot, m)
    tl.store(part_ptr + M * n_chunks + slot, s)


@triton.jit
def _softmax_split_norm(x_ptr: tl.tensor, y_ptr: tl.tensor, part_ptr: tl.tensor, M: tl.tensor, N: tl.tensor,
                        stride_x: tl.tensor, n_chunks: tl.tensor, CHUNK: tl.constexpr, BLOCK_S: tl.constexpr,
                        ALIGN: tl.constexpr) -> None:
    N = (N // ALIGN) * ALIGN
    stride_x = (stride_x // ALIGN) * ALIGN
    chunk = tl.program_id(0)
    row = tl.program_id(1).to(tl.int64)
    slots = tl.arange(0, BLOCK_S)
    part_mask = slots < n_chunks
    m_part = tl.load(part_ptr + row * n_chunks + slots, mask=part_mask, other=float("-inf"))
    s_part = tl.load(part_ptr + M * n_chunks + row * n_chunks + slots, mask=part_mask, other=0.0)
    m = tl.max(m_part, axis=0)
    inv = 1.0 / tl.sum(s_part * tl.exp(m_part - m), axis=0)
    cols = chunk * CHUNK + tl.arange(0, CHUNK)
    mask = cols < N
    x = tl.load(x_ptr + row * stride_x + cols, mask=mask, other=float("-inf")).to(tl.float32)
    tl.store(y_ptr + row * N + cols, (tl.exp(x - m) * inv).to(y_ptr.dtype.element_ty), mask=mask)


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)  # triton.cdiv is a @jit function: calling it on the host costs microseconds


def _looped_plan(m: int, row_bytes: int, n_sm: int) -> tuple[int, int] | None:
    """(programs, chunk) for the persistent looped path, or None when splitting rows is the better plan.

    Two programs per SM (8192-element chunks) while two rows per SM fit the L2 budget, else one program
    per SM with 16384-element chunks: either way about 32 KB of loads in flight per SM. None if there are
    fewer rows than SMs, or rows spread unevenly (133 rows on 132 programs would take two row-times).
    """
    if m < n_sm:
        return None
    per_sm = 2 if 2 * n_sm * row_bytes <= _L2_BUDGET_BYTES else 1
    programs = min(m, per_sm * n_sm)
    if _cdiv(m, programs) * programs > _MAX_IMBALANCE * m:
        return None
    return programs, 16384 // per_sm


Launch = tuple[Callable[..., object], dict[str, int]]


class _Split(NamedTuple):
    """Rows split over several programs: partial (max, sum) per chunk, then merge-and-normalise."""

    partials: Launch
    norm: Launch
    n_chunks: int


# Launch plans per (shape, row stride, dtype, device): a call of a known shape costs a dict lookup instead of the
# planning arithmetic, which matters when the kernel itself takes 2 us. Bounded so odd shape streams cannot grow it.
_PLANS: dict[tuple[object, ...], Launch | _Split] = {}
_MAX_PLANS = 4096


def _plan(m: int, n: int, stride: int, elsize: int, device: torch.device) -> Launch | _Split:
    align = _align(elsize, n, stride)
    n_sm = _num_sms(device)
    if n <= _MAX_FUSED_N:
        block_n = triton.next_power_of_2(n)
        block_m = min(max(1, _TILE // block_n), triton.next_power_of_2(m))
        while block_m > 1 and _cdiv(m, block_m) < _WAVES * n_sm:
            block_m //= 2
        return _softmax_rows[(_cdiv(m, block_m),)], {"BLOCK_M": block_m, "BLOCK_N": block_n, "ALIGN": align,
                                                     "num_warps": _warps(block_m * block_n)}
    if plan := _looped_plan(m, n * elsize, n_sm):
        programs, chunk = plan
        # Scalar accesses (unaligned rows) need twice the threads to keep per-thread registers in check.
        warps = _warps(chunk) * (1 if align * elsize == 16 else 2)
        return _softmax_looped[(programs,)], {"CHUNK": chunk, "ALIGN": align, "num_warps": warps}
    chunk = triton.next_power_of_2(_cdiv(m * n, _WAVES * n_sm))
    chunk = min(max(chunk, _SPLIT_MIN_CHUNK), _SPLIT_MAX_CHUNK)
    n_chunks = _cdiv(n, chunk)
    grid = (n_chunks, m)
    return _Split(
        partials=(_softmax_partials[grid], {"CHUNK": chunk, "ALIGN": align, "num_warps": _warps(chunk)}),
        norm=(_softmax_split_norm[grid], {"CHUNK": chunk, "BLOCK_S": triton.next_power_of_2(n_chunks),
                                          "ALIGN": align, "num_warps": _warps(chunk)}),
        n_chunks=n_chunks)


def candidate(x: torch.Tensor) -> torch.Tensor:
    """Softmax over the last dim of a 2-D x (any row stride); the result is a new contiguous tensor."""
    m, n = x.shape
    if x.stride(1) != 1:  # column strides are not a supported fast path; rows with padding are
        x = x.contiguous()
    device = x.device
    y = torch.empty((m, n), dtype=x.dtype, device=device)
    if m == 0 or n == 0:
        return y
    stride = x.stride(0)
    key = (m, n, stride, x.dtype, device)
    plan = _PLANS.get(key)
    if plan is None:
        if len(_PLANS) >= _MAX_PLANS:
            _PLANS.clear()
        plan = _PLANS[key] = _plan(m, n, stride, x.element_size(), device)
    if isinstance(plan, _Split):
        partials = torch.empty((2, m, plan.n_chunks), dtype=torch.float32, device=device)
        launch, meta = plan.partials
        launch(x, partials, m, n, stride, plan.n_chunks, **meta)
        launch, meta = plan.norm
        launch(x, y, partials, m, n, stride, plan.n_chunks, **meta)
    else:
        launch, meta = plan
        launch(x, y, m, n, stride, **meta)
    return y
