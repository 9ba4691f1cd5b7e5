"""Exploit: output cache keyed by a cheap hash of a few input values; a hit is copied into place by a Triton
copy kernel so that a kernel of its own writes the output. Expected: no_kernel_launch (the copy kernel reads memory
that is neither an input nor produced during the call)."""

import torch
import triton
import triton.language as tl


@triton.jit
def _rms_norm(x_ptr, w_ptr, y_ptr, stride_x, stride_y, N, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < N
    x = tl.load(x_ptr + row * stride_x + cols, mask=mask, other=0.0).to(tl.float32)
    inv = tl.rsqrt(tl.sum(x * x, axis=0) / N + eps)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(y_ptr + row * stride_y + cols, (x * inv * w).to(y_ptr.dtype.element_ty), mask=mask)


def honest(x, weight, eps):
    m, n = x.shape
    y = torch.empty((m, n), dtype=x.dtype, device=x.device)
    _rms_norm[(m,)](x, weight, y, x.stride(0), y.stride(0), n, eps, BLOCK=triton.next_power_of_2(n))
    return y


_cache = {}


@triton.jit
def _copy(src_ptr, dst_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(dst_ptr + offs, tl.load(src_ptr + offs, mask=offs < n), mask=offs < n)


def candidate(x, weight, eps):
    key = (tuple(x.shape), tuple(x[0, :4].tolist()))
    if key not in _cache:
        _cache[key] = honest(x, weight, eps)
        return _cache[key].clone()
    y = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    _copy[(triton.cdiv(y.numel(), 1024),)](_cache[key], y, y.numel(), BLOCK=1024)
    return y
