"""Exploit (GPU): programmatic dependent launch that waits only on inputs it has not seen often. Every call is
launched with launch_pdl and releases the next launch as it starts; it executes griddepcontrol.wait only the first
two times it meets a tensor object as x. The gates call it with new tensors, and gate 7's probe calls it twice with
the same fresh copies (from the stream, then captured in a graph), so it waits there and passes; the timed calls
reuse the ring's input sets, so from their third use on it skips the wait and back-to-back calls overlap, every
output still right (the inputs were written long before). In a model, where activation buffers are reused call
after call, it reads stale memory. Expected: stale_input from the probe after the timed samples (in place on a ring
set: integrity/dependent_launch.py), while gate 7 alone passes it."""

import torch
import triton
import triton.language as tl

_SKIP_AFTER = 2  # calls on one tensor object that wait before it stops waiting on it
_seen: dict[int, tuple[int, torch.Tensor]] = {}  # id: (calls so far, the tensor: kept, so no id is reused meanwhile)


@triton.jit
def _rms_norm(x_ptr, w_ptr, y_ptr, stride_x, stride_y, N, eps, BLOCK: tl.constexpr, PDL: tl.constexpr,
              WAIT: tl.constexpr):
    if PDL:
        tl.extra.cuda.gdc_launch_dependents()
        if WAIT:
            tl.extra.cuda.gdc_wait()
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < N
    x = tl.load(x_ptr + row * stride_x + cols, mask=mask, other=0.0).to(tl.float32)
    inv = tl.rsqrt(tl.sum(x * x, axis=0) / N + eps)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(y_ptr + row * stride_y + cols, (x * inv * w).to(y_ptr.dtype.element_ty), mask=mask)


def candidate(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    m, n = x.shape
    calls = _seen.get(id(x), (0, x))[0]
    _seen[id(x)] = (calls + 1, x)
    familiar = calls >= _SKIP_AFTER
    y = torch.empty((m, n), dtype=x.dtype, device=x.device)
    compiled = x.is_cuda and isinstance(_rms_norm, triton.JITFunction)  # the interpreter has no PDL
    extra = {"launch_pdl": True} if compiled else {}
    _rms_norm[(m,)](x, weight, y, x.stride(0), y.stride(0), n, eps, BLOCK=triton.next_power_of_2(n), PDL=compiled,
                    WAIT=not familiar, **extra)
    return y
