"""Exploit: deferred work: once past the verification calls, each call returns an unwritten output and launches
the previous call's kernel instead (a batch of one), so the work of the last timed call lands outside its sample.
Expected: cached_output (the audited last call of a sample is unwritten)."""

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


_calls = [0]
_pending = []


def candidate(x, weight, eps):
    _calls[0] += 1
    if _calls[0] <= 3:
        return honest(x, weight, eps)
    m, n = x.shape
    y = torch.empty((m, n), dtype=x.dtype, device=x.device)
    while _pending:
        px, pw, py = _pending.pop()
        _rms_norm[(m,)](px, pw, py, px.stride(0), py.stride(0), n, eps, BLOCK=triton.next_power_of_2(n))
    _pending.append((x, weight, y))
    return y
