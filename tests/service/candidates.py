"""Candidate sources used by the service tests (plain text, as a generator fleet would send them)."""

from __future__ import annotations

_KERNEL = """
import torch
import triton
import triton.language as tl


@triton.jit
def _rms_norm_kernel(x_ptr, w_ptr, y_ptr, stride_x, stride_y, N, eps, BLOCK_N: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_N)
    mask = cols < N
    x = tl.load(x_ptr + row * stride_x + cols, mask=mask, other=0.0).to(tl.float32)
    inv = tl.rsqrt(tl.sum(x * x, axis=0) / N + eps)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(y_ptr + row * stride_y + cols, (OUTPUT).to(y_ptr.dtype.element_ty), mask=mask)


def rms_norm(x, weight, eps):
    m, n = x.shape
    if x.stride(1) != 1:
        x = x.contiguous()
    y = torch.empty((m, n), dtype=x.dtype, device=x.device)
    _rms_norm_kernel[(m,)](x, weight, y, x.stride(0), y.stride(0), n, eps, BLOCK_N=triton.next_power_of_2(n))
    return y
"""

_ENTRY = "\n\ndef candidate(x, weight, eps):\n    return rms_norm(x, weight, eps)\n"

# A correct rms_norm.
GOOD = _KERNEL.replace("OUTPUT", "x * inv * w") + _ENTRY

# Deliberately wrong: forgets the weight (tolerance failure).
NO_WEIGHT = _KERNEL.replace("OUTPUT", "x * inv") + _ENTRY

# Kills its own process on every call: without a sandbox the job process dies, attempt after attempt.
SELF_KILLING = (
    GOOD
    + """

import os, signal


def candidate(x, weight, eps):
    os.kill(os.getpid(), signal.SIGKILL)
"""
)


def slow_once(mark_path: str) -> str:
    """Correct, but the first attempt ever creates `mark_path` and then hangs (a worker to be killed)."""
    return (
        GOOD
        + f"""

import os, time

_MARK = {mark_path!r}


def candidate(x, weight, eps):
    if not os.path.exists(_MARK):
        open(_MARK, "w").close()
        time.sleep(600)
    return rms_norm(x, weight, eps)
"""
    )
