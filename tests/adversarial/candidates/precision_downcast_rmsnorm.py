"""Exploit: a precision downcast hiding in a loose tolerance: squares and their sum accumulated in the input's 16-bit
type instead of FP32. Expected: tolerance (beyond one ulp on ordinary rows; overflow on large values)."""

import torch
import triton
import triton.language as tl


@triton.jit
def _rms_norm(x_ptr, w_ptr, y_ptr, stride_x, stride_y, N, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < N
    x = tl.load(x_ptr + row * stride_x + cols, mask=mask, other=0.0)
    ss = tl.sum(x * x, axis=0)
    inv = tl.rsqrt(ss.to(tl.float32) / N + eps)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(y_ptr + row * stride_y + cols, (x.to(tl.float32) * inv * w).to(y_ptr.dtype.element_ty), mask=mask)


def candidate(x, weight, eps):
    m, n = x.shape
    y = torch.empty((m, n), dtype=x.dtype, device=x.device)
    _rms_norm[(m,)](x, weight, y, x.stride(0), y.stride(0), n, eps, BLOCK=triton.next_power_of_2(n))
    return y
