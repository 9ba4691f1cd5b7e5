"""Honest and deliberately slow: one kernel writes each row's inverse RMS to an FP32 buffer, a second one scales."""

import torch
import triton
import triton.language as tl


@triton.jit
def _inv_rms(x_ptr, inv_ptr, N, stride_x, eps, CHUNK: tl.constexpr):
    row = tl.program_id(0)
    acc = tl.zeros((CHUNK,), dtype=tl.float32)
    for off in range(0, N, CHUNK):
        cols = off + tl.arange(0, CHUNK)
        x = tl.load(x_ptr + row * stride_x + cols, mask=cols < N, other=0.0).to(tl.float32)
        acc += x * x
    tl.store(inv_ptr + row, tl.rsqrt(tl.sum(acc, axis=0) / N + eps))


@triton.jit
def _scale(x_ptr, w_ptr, inv_ptr, y_ptr, N, stride_x, stride_y, CHUNK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.program_id(1) * CHUNK + tl.arange(0, CHUNK)
    mask = cols < N
    x = tl.load(x_ptr + row * stride_x + cols, mask=mask, other=0.0).to(tl.float32)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    inv = tl.load(inv_ptr + row)
    tl.store(y_ptr + row * stride_y + cols, (x * inv * w).to(y_ptr.dtype.element_ty), mask=mask)


def candidate(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    m, n = x.shape
    inv = torch.empty((m,), dtype=torch.float32, device=x.device)
    y = torch.empty((m, n), dtype=x.dtype, device=x.device)
    chunk = min(1024, triton.next_power_of_2(n))
    _inv_rms[(m,)](x, inv, n, x.stride(0), eps, CHUNK=chunk)
    _scale[(m, triton.cdiv(n, chunk))](x, weight, inv, y, n, x.stride(0), y.stride(0), CHUNK=chunk)
    return y
