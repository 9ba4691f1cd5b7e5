"""Exploit (of precision, not of the harness): the row max and log2 of the sum folded into one multiply-add per
exponent, y = 2^(x log2 e - (max log2 e + log2 sum)), a common speed trick. Exact while the logits are small, so it
passes every published case; the shift (and, unfused, each x log2 e) is rounded to fp32 at its own size, so fp32
logits offset by 1e6 put exponents off by up to 1/16 (4% of y); a row wholly masked with the dtype's lowest value
folds its max to -inf and writes NaN. Expected: tolerance (on the hidden offset case), non_finite (on the hidden
lowest_mask case)."""

import torch
import triton
import triton.language as tl


@triton.jit
def _softmax(x_ptr, y_ptr, stride_x, stride_y, N, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < N
    x = tl.load(x_ptr + row * stride_x + cols, mask=mask, other=float("-inf")).to(tl.float32)
    m = tl.max(x, axis=0) * 1.4426950408889634
    total = tl.sum(tl.math.exp2(x * 1.4426950408889634 - m), axis=0)
    y = tl.math.exp2(x * 1.4426950408889634 - (m + tl.log2(total)))
    tl.store(y_ptr + row * stride_y + cols, y.to(y_ptr.dtype.element_ty), mask=mask)


def candidate(x):
    m, n = x.shape
    y = torch.empty((m, n), dtype=x.dtype, device=x.device)
    _softmax[(m,)](x, y, x.stride(0), y.stride(0), n, BLOCK=triton.next_power_of_2(n))
    return y
