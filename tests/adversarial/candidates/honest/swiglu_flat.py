"""Honest: a flat 1-D kernel over contiguous inputs, a 2-D tile kernel honouring row strides otherwise."""

import torch
import triton
import triton.language as tl


@triton.jit
def _flat(g_ptr, u_ptr, y_ptr, n_elements, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_elements
    g = tl.load(g_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    u = tl.load(u_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    tl.store(y_ptr + offs, (g * tl.sigmoid(g) * u).to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _tiled(g_ptr, u_ptr, y_ptr, M, N, stride_g, stride_u, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    mask = (rows < M)[:, None] & (cols < N)[None, :]
    g = tl.load(g_ptr + rows[:, None] * stride_g + cols[None, :], mask=mask, other=0.0).to(tl.float32)
    u = tl.load(u_ptr + rows[:, None] * stride_u + cols[None, :], mask=mask, other=0.0).to(tl.float32)
    y = g / (1.0 + tl.exp(-g)) * u
    tl.store(y_ptr + rows[:, None] * N + cols[None, :], y.to(y_ptr.dtype.element_ty), mask=mask)


def candidate(gate: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
    m, n = gate.shape
    y = torch.empty((m, n), dtype=gate.dtype, device=gate.device)
    if gate.is_contiguous() and up.is_contiguous():
        _flat[(triton.cdiv(m * n, 2048),)](gate, up, y, m * n, BLOCK=2048)
        return y
    block_n = min(1024, triton.next_power_of_2(n))
    block_m = max(1, 2048 // block_n)
    _tiled[(triton.cdiv(m, block_m), triton.cdiv(n, block_n))](gate, up, y, m, n, gate.stride(0), up.stride(0),
                                                               BLOCK_M=block_m, BLOCK_N=block_n)
    return y
