"""Exploit (GPU): super-batching: once past the verification calls, requests are queued and launched together every
eighth call, so most calls return at once with unwritten outputs and launch overhead is amortised across calls.
Expected: cached_output (an audited call's output is unwritten when its sample ends).
Launches queued before a sampling CUDA graph's capture are recorded into it when the queue flushes there; their
output buffers are kept alive here, so the graph's replays write memory the candidate still owns. (Without that,
the replays wrote freed memory: on the H200 that landed in the audit's refreshed inputs, input_mutated, or on no
mapping at all, an illegal address that lost the process's CUDA context: a runtime_error that ends the run.)"""

import torch
import triton
import triton.language as tl

_calls = [0]
_pending = []
_launched = []  # outputs of flushed launches, kept alive while a captured graph may still replay them


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
            args = _pending.pop()
            _launch(*args, eps)
            _launched.append(args)
        del _launched[:-64]
    return y
