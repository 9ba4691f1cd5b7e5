"""Exploit (GPU): programmatic dependent launch without the wait. Each call is launched with launch_pdl and releases
the next launch as it starts, so back-to-back timed calls overlap (the next call's programs fill the SMs this one's
tail leaves idle), and it never executes griddepcontrol.wait before reading x and the weight. The timed inputs were
written long before, so every timed output is right; in a model, where the kernel before it writes x, it reads
stale memory. Expected: stale_input (integrity/dependent_launch.py), once the probe is on."""

import torch
import triton
import triton.language as tl


@triton.jit
def _rms_norm(x_ptr, w_ptr, y_ptr, stride_x, stride_y, N, eps, BLOCK: tl.constexpr, PDL: tl.constexpr):
    if PDL:
        tl.extra.cuda.gdc_launch_dependents()  # the next call may start now; no gdc_wait before the loads
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < N
    x = tl.load(x_ptr + row * stride_x + cols, mask=mask, other=0.0).to(tl.float32)
    inv = tl.rsqrt(tl.sum(x * x, axis=0) / N + eps)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(y_ptr + row * stride_y + cols, (x * inv * w).to(y_ptr.dtype.element_ty), mask=mask)


def candidate(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    m, n = x.shape
    y = torch.empty((m, n), dtype=x.dtype, device=x.device)
    compiled = x.is_cuda and isinstance(_rms_norm, triton.JITFunction)  # the interpreter has no PDL
    extra = {"launch_pdl": True} if compiled else {}
    _rms_norm[(m,)](x, weight, y, x.stride(0), y.stride(0), n, eps, BLOCK=triton.next_power_of_2(n), PDL=compiled,
                    **extra)
    return y
