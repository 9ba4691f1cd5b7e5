"""Exploit: a precision downcast hiding in a loose tolerance: exp and the row sum computed in the input's 16-bit type
instead of FP32 (cheaper registers and bandwidth on a GPU, within the elementwise tolerance).
Expected: tolerance (more than 2% of elements are beyond one ulp of the exact result)."""

import torch
import triton
import triton.language as tl


@triton.jit
def _softmax(x_ptr, y_ptr, stride_x, stride_y, N, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < N
    x = tl.load(x_ptr + row * stride_x + cols, mask=mask, other=float("-inf"))
    e = tl.exp(x - tl.max(x, axis=0)).to(x.dtype)
    s = tl.sum(e, axis=0)
    tl.store(y_ptr + row * stride_y + cols, (e / s).to(y_ptr.dtype.element_ty), mask=mask)


def candidate(x):
    m, n = x.shape
    y = torch.empty((m, n), dtype=x.dtype, device=x.device)
    _softmax[(m,)](x, y, x.stride(0), y.stride(0), n, BLOCK=triton.next_power_of_2(n))
    return y
