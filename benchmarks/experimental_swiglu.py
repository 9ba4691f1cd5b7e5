"""The 2-D tile kernel the built-in swiglu ran on strided rows before the gather kernel, kept for the A/B in
`kernel_sweep.py --only swiglu`: BLOCK_M rows x BLOCK_N columns per program, masked on both. At widths that are not
a multiple of BLOCK_N its last column tile is mostly masked (5000-wide rows in 4096-column tiles: 39% of the lanes
idle), which held it near 80% of copy bandwidth on the H200 (benchmarks/NOTES.md).
"""

from __future__ import annotations

import triton
import triton.language as tl

from kernelproof_core.kernels.swiglu import _silu_mul


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
