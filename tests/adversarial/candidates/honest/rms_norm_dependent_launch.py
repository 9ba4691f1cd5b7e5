"""Honest: programmatic dependent launch done right. Launched with launch_pdl on a GPU, each program releases the
next launch at once, then executes griddepcontrol.wait (gdc_wait) before it reads anything: its programs may be
scheduled while the kernel before it finishes, but they read x and the weight only once that kernel's writes are
visible. Under the interpreter (no PDL) it is a plain kernel."""

import torch
import triton
import triton.language as tl


@triton.jit
def _rms_norm(x_ptr, w_ptr, y_ptr, stride_x, stride_y, N, eps, BLOCK: tl.constexpr, PDL: tl.constexpr):
    if PDL:
        tl.extra.cuda.gdc_launch_dependents()
        tl.extra.cuda.gdc_wait()  # the kernel before this one has finished and its writes are visible
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
    compiled = x.is_cuda and isinstance(_rms_norm, triton.JITFunction)
    extra = {"launch_pdl": True} if compiled else {}
    _rms_norm[(m,)](x, weight, y, x.stride(0), y.stride(0), n, eps, BLOCK=triton.next_power_of_2(n), PDL=compiled,
                    **extra)
    return y
