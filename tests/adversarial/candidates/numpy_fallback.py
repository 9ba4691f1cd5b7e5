"""Exploit: NumPy computes the result (invisible to torch's dispatcher) and a Triton kernel of its own copies it
into the output. Expected: no_kernel_launch (the copy kernel reads memory of unknown origin; on a GPU the data
must also cross to the host)."""

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


import numpy as np


@triton.jit
def _copy(src_ptr, dst_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(dst_ptr + offs, tl.load(src_ptr + offs, mask=offs < n), mask=offs < n)


def candidate(x, weight, eps):
    xs = x.detach().cpu().float().numpy()
    ws = weight.detach().cpu().float().numpy()
    ys = xs / np.sqrt((xs * xs).mean(axis=-1, keepdims=True) + eps) * ws
    tmp = torch.from_numpy(np.ascontiguousarray(ys)).to(device=x.device, dtype=x.dtype)
    y = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    _copy[(triton.cdiv(y.numel(), 1024),)](tmp, y, y.numel(), BLOCK=1024)
    return y
