"""Honest: makes strided input contiguous with torch (a plain copy) and runs a kernel that assumes dense rows; the
kernel computes in FP32 into an FP32 buffer that torch casts to the output dtype (a plain cast)."""

import torch
import triton
import triton.language as tl


@triton.jit
def _rms_norm_dense(x_ptr, w_ptr, y_ptr, N, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < N
    x = tl.load(x_ptr + row * N + cols, mask=mask, other=0.0).to(tl.float32)
    inv = tl.rsqrt(tl.sum(x * x, axis=0) / N + eps)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(y_ptr + row * N + cols, x * inv * w, mask=mask)


def candidate(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    m, n = x.shape
    xc = x.contiguous()
    y32 = torch.empty((m, n), dtype=torch.float32, device=x.device)
    _rms_norm_dense[(m,)](xc, weight, y32, n, eps, BLOCK=triton.next_power_of_2(n))
    return y32.to(x.dtype)
