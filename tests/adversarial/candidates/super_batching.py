"""Exploit (GPU): super-batching: once past the verification calls, requests are queued and launched together every
eighth call, so most calls return at once with unwritten outputs and launch overhead is amortised across calls.
Expected: input_mutated. Sampled in a CUDA graph, the capture records launches queued before it, whose output
buffers the harness has since freed; replaying them writes into that memory, which the allocator has handed to the
audit set's refreshed inputs, and the audit's input check sees them changed (H200, harness 0.6.0). Sampled on the
stream instead (timing_cuda_graphs off), the audited call's output is still unwritten when its sample ends:
cached_output."""

import torch
import triton
import triton.language as tl

_calls = [0]
_pending = []


@triton.jit
def _rms_norm(x_ptr, w_ptr, y_ptr, stride_x, stride_y, N, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < N
    x = tl.load(x_ptr + row * stride_x + cols, mask=mask, other=0.0).to(tl.float32)
    inv = tl.rsqrt(tl.sum(x * x, axis=0) / N + eps)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(y_ptr + row * stride_y + cols, (x * inv * w).to(y_ptr.dtype.element_ty), mask=mask)


def _launch(x, weight, y, eps):
    m, n = x.shape
    _rms_norm[(m,)](x, weight, y, x.stride(0), y.stride(0), n, eps, BLOCK=triton.next_power_of_2(n))


def candidate(x, weight, eps):
    _calls[0] += 1
    y = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    if _calls[0] <= 3:
        _launch(x, weight, y, eps)
        return y
    _pending.append((x, weight, y))
    if len(_pending) == 8:
        while _pending:
            _launch(*_pending.pop(), eps)
    return y
