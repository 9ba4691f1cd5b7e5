"""Built-in swiglu candidate: y = silu(gate) * up, computed in FP32 and rounded once on store.

SwiGLU is pure streaming (two reads, one write per element), so the only goals are full-width vector
accesses and enough bytes in flight. Contiguous inputs use a flat 1-D kernel: no index math, and only the
last program pays for a mask. Strided rows (e.g. the two halves of a fused [M, 2N] projection) use a 2-D
tile kernel that takes the row strides as arguments, so views are read in place instead of being copied.
Configs come from a fixed heuristic, not autotuning: the first call is cheap and every run picks the same
kernel.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import torch
import triton
import triton.language as tl

# Flat path: elements per program and warps (8 per thread: one 16-byte vector of bf16). On the H200 (bf16, CUPTI
# kernel time) 1024 on 4 warps matched or beat 2048-8192 on 2-16 warps and torch.compile's kernel at 4096 x 4096,
# 4096 x 11008 and 32768 x 8192 (benchmarks/kernel_sweep.py --cupti --only swiglu_parity).
_FLAT_BLOCK, _FLAT_WARPS = 1024, 4
_TILE_BYTES = 8192  # same budget for a 2-D tile
_WAVES = 4  # shrink blocks until the grid covers this many programs per SM
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
def _swiglu_rows(g_ptr: tl.tensor, u_ptr: tl.tensor, y_ptr: tl.tensor, M: tl.tensor, N: tl.tensor,
                 stride_g: tl.tensor, stride_u: tl.tensor, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                 ALIGN: tl.constexpr) -> None:
    # The host guarantees ALIGN divides N and both strides; rewriting them as multiples of ALIGN lets the
    # compiler prove that masks and row starts are vector-aligned even when N is not a multiple of 16.
    N = (N // ALIGN) * ALIGN
    stride_g = (stride_g // ALIGN) * ALIGN
    stride_u = (stride_u // ALIGN) * ALIGN
    row0 = tl.program_id(0).to(tl.int64) * BLOCK_M
    rows = tl.arange(0, BLOCK_M)
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    mask = (rows < M - row0)[:, None] & (cols < N)[None, :]
    g = tl.load(g_ptr + row0 * stride_g + rows[:, None] * stride_g + cols[None, :], mask=mask, other=0.0)
    u = tl.load(u_ptr + row0 * stride_u + rows[:, None] * stride_u + cols[None, :], mask=mask, other=0.0)
    y = _silu_mul(g.to(tl.float32), u.to(tl.float32))
    tl.store(y_ptr + row0 * N + rows[:, None] * N + cols[None, :], y.to(y_ptr.dtype.element_ty), mask=mask)


def _warps(block_bytes: int) -> int:
    return 8 if block_bytes >= 8192 else 4


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)  # triton.cdiv is a @jit function: calling it on the host costs microseconds


Launch = tuple[Callable[..., object], dict[str, int], bool]  # launcher, meta-parameters, flat (contiguous) path
# Launch plans per (shape, strides, dtype, device): a call of a known shape costs a dict lookup instead of the
# planning arithmetic, which matters when the kernel itself takes 2 us. Bounded so odd shape streams cannot grow it.
_PLANS: dict[tuple[object, ...], Launch] = {}
_MAX_PLANS = 4096


def _plan(m: int, n: int, stride_g: int, stride_u: int, elsize: int, device: torch.device) -> Launch:
    target_programs = _WAVES * _num_sms(device)
    total = m * n
    if stride_g == n and stride_u == n:  # both contiguous: one flat stream
        return _swiglu_flat[(_cdiv(total, _FLAT_BLOCK),)], {"BLOCK": _FLAT_BLOCK, "num_warps": _FLAT_WARPS}, True
    tile = _TILE_BYTES // elsize
    block_n = min(triton.next_power_of_2(n), tile)
    block_m = min(tile // block_n, triton.next_power_of_2(m))
    col_blocks = _cdiv(n, block_n)
    while block_m > 1 and _cdiv(m, block_m) * col_blocks < target_programs:
        block_m //= 2
    align = _align(elsize, n, stride_g, stride_u)
    grid = (_cdiv(m, block_m), col_blocks)
    return _swiglu_rows[grid], {"BLOCK_M": block_m, "BLOCK_N": block_n, "ALIGN": align,
                                "num_warps": _warps(block_m * block_n * elsize)}, False


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
        launch(gate, up, y, m, n, stride_g, stride_u, **meta)
    return y
