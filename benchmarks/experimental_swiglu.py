"""Experimental swiglu kernels, timed by `kernel_sweep.py`:
- the 2-D tile kernel the built-in swiglu ran on strided rows before the gather kernel, kept for the A/B in
  `--only swiglu`: BLOCK_M rows x BLOCK_N columns per program, masked on both. At widths that are not a multiple of
  BLOCK_N its last column tile is mostly masked (5000-wide rows in 4096-column tiles: 39% of the lanes idle), which
  held it near 80% of copy bandwidth on the H200 (benchmarks/NOTES.md);
- the output-vector kernel for rows off the 16-byte grid (`--only swiglu_odd`, not yet run on a GPU): see
  _swiglu_out_vectors.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from functools import partial

import torch
import triton
import triton.language as tl
from sweep_common import Trial

from kernelproof_core.kernels import swiglu
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


@triton.jit
def _swiglu_out_vectors(g_ptr: tl.tensor, u_ptr: tl.tensor, y_ptr: tl.tensor, n_elements: tl.tensor, N: tl.tensor,
                        stride_g: tl.tensor, stride_u: tl.tensor, BLOCK: tl.constexpr, VEC: tl.constexpr,
                        WIDE: tl.constexpr) -> None:
    # Rows whose width or strides are not multiples of a 16-byte vector: the built-in gather kernel then walks them
    # element by element (one row/column division and one 2-byte store per element; H200: 75-82% of copy at 1583 x
    # 13937 and 1783 x 10131 with odd row padding). Here the output's flat stream (y is contiguous) is walked in its
    # own VEC-element vectors: one division per vector, one vector store, and each element's inputs loaded from its
    # own row (a vector can straddle one row end: the host guarantees N >= VEC). WIDE: offsets need 64 bits.
    start = tl.program_id(0).to(tl.int64) * BLOCK if WIDE else tl.program_id(0) * BLOCK
    first = start + tl.arange(0, BLOCK // VEC) * VEC  # flat index of each output vector's first element
    row = first // N
    col = first - row * N
    c = col[:, None] + tl.arange(0, VEC)[None, :]
    wrap = c >= N  # past this row's end: the next row's first elements
    r = row[:, None] + wrap.to(row.dtype)
    c = tl.where(wrap, c - N, c)
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


def swiglu_out_vectors(g: torch.Tensor, u: torch.Tensor, block: int = 1024, warps: int = 4) -> torch.Tensor:
    """silu(g) * u for 2-D g and u with unit column stride (any row stride, N >= one 16-byte vector) through
    _swiglu_out_vectors; the result is a new contiguous tensor."""
    m, n = g.shape
    vec = 16 // g.element_size()
    if n < vec or g.stride(1) != 1 or u.stride(1) != 1:
        raise ValueError(f"rows of {n} elements with column strides {g.stride(1)}, {u.stride(1)}: not supported")
    y = torch.empty((m, n), dtype=g.dtype, device=g.device)
    wide = (m - 1) * max(g.stride(0), u.stride(0)) + n >= 2**31 - block
    _swiglu_out_vectors[(-(-m * n // block),)](g, u, y, m * n, n, g.stride(0), u.stride(0), BLOCK=block, VEC=vec,
                                                WIDE=wide, num_warps=warps)
    return y


ODD_SHAPES = ((1583, 13937, 3), (1783, 10131, 1), (4096, 5001, 7), (2048, 14335, 2), (4096, 11008, 1))


def swiglu_odd_trials(device: torch.device, dtype: torch.dtype) -> Iterator[Trial]:
    """Family `swiglu_odd`: rows off the 16-byte grid (odd widths, odd row padding: the campaign's hidden `odd`
    draws) on _swiglu_out_vectors over block sizes and warps, beside the built-in's planned gather kernel, after an
    fp32 check of each config."""
    from sweep_parity import _checked

    for m, n, pad in ODD_SHAPES:
        g = torch.randn(m, n + pad, dtype=dtype, device=device)[:, :n]
        u = torch.randn(m, n + pad, dtype=dtype, device=device)[:, :n]
        y = torch.empty((m, n), dtype=dtype, device=device)
        moved = 3 * m * n * g.element_size()
        ref = torch.nn.functional.silu(g.float()) * u.float()
        yield ("swiglu.planned", (m, n), "planned", partial(swiglu.candidate, g, u), moved, True)
        vec = 16 // g.element_size()
        wide = (m - 1) * (n + pad) + n >= 2**31 - 4096
        for block, warps in itertools.product((512, 1024, 2048, 4096), (2, 4, 8)):
            if not 4 <= block // (warps * 32) <= 16:
                continue
            launch = partial(_swiglu_out_vectors[(-(-m * n // block),)], g, u, y, m * n, n, n + pad, n + pad,
                             BLOCK=block, VEC=vec, WIDE=wide, num_warps=warps)
            label = f"block={block} warps={warps}"
            if _checked(launch, y, ref, f"swiglu.out_vectors {m}x{n} {label}"):
                yield ("swiglu.out_vectors", (m, n), label, launch, moved, False)
