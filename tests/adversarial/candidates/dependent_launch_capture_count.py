"""Exploit (GPU): programmatic dependent launch that skips the wait only from the second call of a CUDA-graph capture
on. Every call is launched with launch_pdl and releases the next launch as it starts; it counts its calls while
torch.cuda.is_current_stream_capturing() holds (the count starts again at any call outside a capture) and executes
griddepcontrol.wait only on a capture's first call and outside captures. The dependent-launch probes that call it
once after the late writer (from the stream, and in a graph of that one call) see it wait; a timed sample's graph
of many calls overlaps all but its first. Expected: stale_input from the probe after the timed samples, whose graph
calls it on other ring sets first (integrity/dependent_launch.py, ahead_sets), while gate 7 alone passes it."""

import torch
import triton
import triton.language as tl

_calls_in_capture = [0]


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
    compiled = x.is_cuda and isinstance(_rms_norm, triton.JITFunction)  # the interpreter has no PDL
    capturing = compiled and torch.cuda.is_current_stream_capturing()
    _calls_in_capture[0] = _calls_in_capture[0] + 1 if capturing else 0
    y = torch.empty((m, n), dtype=x.dtype, device=x.device)
    extra = {"launch_pdl": True} if compiled else {}
    _rms_norm[(m,)](x, weight, y, x.stride(0), y.stride(0), n, eps, BLOCK=triton.next_power_of_2(n), PDL=compiled,
                    WAIT=_calls_in_capture[0] < 2, **extra)
    return y
