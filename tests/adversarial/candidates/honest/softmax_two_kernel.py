"""Honest and deliberately slow: a statistics kernel writes each row's max and sum of exponentials to FP32 buffers,
then a second kernel, over a 2-D grid of row chunks, normalises."""

import torch
import triton
import triton.language as tl


@triton.jit
def _stats(x_ptr, max_ptr, sum_ptr, N, stride_x, CHUNK: tl.constexpr):
    row = tl.program_id(0)
    m = tl.full((CHUNK,), float("-inf"), dtype=tl.float32)
    for off in range(0, N, CHUNK):
        cols = off + tl.arange(0, CHUNK)
        m = tl.maximum(m, tl.load(x_ptr + row * stride_x + cols, mask=cols < N, other=float("-inf")).to(tl.float32))
    row_max = tl.max(m, axis=0)
    s = tl.zeros((CHUNK,), dtype=tl.float32)
    for off in range(0, N, CHUNK):
        cols = off + tl.arange(0, CHUNK)
        x = tl.load(x_ptr + row * stride_x + cols, mask=cols < N, other=float("-inf")).to(tl.float32)
        s += tl.exp(x - row_max)
    tl.store(max_ptr + row, row_max)
    tl.store(sum_ptr + row, tl.sum(s, axis=0))


@triton.jit
def _normalise(x_ptr, max_ptr, sum_ptr, y_ptr, N, stride_x, stride_y, CHUNK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.program_id(1) * CHUNK + tl.arange(0, CHUNK)
    mask = cols < N
    x = tl.load(x_ptr + row * stride_x + cols, mask=mask, other=float("-inf")).to(tl.float32)
    y = tl.exp(x - tl.load(max_ptr + row)) / tl.load(sum_ptr + row)
    tl.store(y_ptr + row * stride_y + cols, y.to(y_ptr.dtype.element_ty), mask=mask)


def candidate(x: torch.Tensor) -> torch.Tensor:
    m, n = x.shape
    row_max = torch.empty((m,), dtype=torch.float32, device=x.device)
    row_sum = torch.empty((m,), dtype=torch.float32, device=x.device)
    y = torch.empty((m, n), dtype=x.dtype, device=x.device)
    chunk = min(2048, triton.next_power_of_2(n))
    _stats[(m,)](x, row_max, row_sum, n, x.stride(0), CHUNK=chunk)
    _normalise[(m, triton.cdiv(n, chunk))](x, row_max, row_sum, y, n, x.stride(0), y.stride(0), CHUNK=chunk)
    return y
