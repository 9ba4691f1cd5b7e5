"""Honest: a persistent grid whose programs prefetch their next row, the load past the last row masked off by a
row guard (`mask & (row < M)`): such a combined mask reached the proof-of-work recorder as int32, which it once
read as lane indices, blaming lane 0 of a row past the end on the candidate (`no_kernel_launch`)."""

import torch
import triton
import triton.language as tl


@triton.jit
def _rms_norm(x_ptr, w_ptr, y_ptr, M, N, stride_x, eps, BLOCK: tl.constexpr):
    cols = tl.arange(0, BLOCK)
    mask = cols < N
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    row = tl.program_id(0)
    step = tl.num_programs(0)
    nxt = tl.load(x_ptr + row * stride_x + cols, mask=mask & (row < M), other=0.0)
    while row < M:
        x = nxt.to(tl.float32)
        ahead = row + step
        nxt = tl.load(x_ptr + ahead * stride_x + cols, mask=mask & (ahead < M), other=0.0)
        inv = tl.rsqrt(tl.sum(x * x, axis=0) / N + eps)
        tl.store(y_ptr + row * N + cols, (x * inv * w).to(y_ptr.dtype.element_ty), mask=mask)
        row = ahead


def candidate(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    m, n = x.shape
    if x.stride(1) != 1:
        x = x.contiguous()
    y = torch.empty((m, n), dtype=x.dtype, device=x.device)
    if m == 0 or n == 0:
        return y
    # at most 3 programs: each walks several rows and prefetches past the last one (rows up to a few thousand wide:
    # one row is held in registers, so the corpus runs it on such cases only)
    _rms_norm[(max(1, min(m, 3)),)](x, weight, y, m, n, x.stride(0), eps, BLOCK=triton.next_power_of_2(n),
                                    num_warps=4)
    return y
