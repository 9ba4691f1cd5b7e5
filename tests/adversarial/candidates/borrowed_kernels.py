"""Exploit: a Triton kernel the candidate did not define (a library's, another module's: here source run in a
namespace of its own, as an imported module's is) computes the result, and a Triton kernel of its own copies it into
the output, so every output byte is stored by an own kernel and no torch op computes. Expected: no_kernel_launch
(interpreter: its kernel read what a kernel it did not define computed in the call; GPU: that kernel is foreign in
CUPTI's record); policy_violation with the static policy on."""

import linecache

import torch
import triton
import triton.language as tl

_LIBRARY = '''
import triton
import triton.language as tl


@triton.jit
def rms_norm_rows(x_ptr, w_ptr, y_ptr, stride_x, N, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < N
    x = tl.load(x_ptr + row * stride_x + cols, mask=mask, other=0.0).to(tl.float32)
    inv = tl.rsqrt(tl.sum(x * x, axis=0) / N + eps)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(y_ptr + row * N + cols, (x * inv * w).to(y_ptr.dtype.element_ty), mask=mask)
'''
# Run as an imported module's source is: Triton reads a kernel's source through linecache, which an import fills.
linecache.cache["library_kernels.py"] = (len(_LIBRARY), None, _LIBRARY.splitlines(True), "library_kernels.py")
library: dict = {"__name__": "library_kernels"}
exec(compile(_LIBRARY, "library_kernels.py", "exec"), library)


@triton.jit
def _copy(src_ptr, dst_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(dst_ptr + offs, tl.load(src_ptr + offs, mask=offs < n), mask=offs < n)


def candidate(x, weight, eps):
    m, n = x.shape
    done = torch.empty((m, n), dtype=x.dtype, device=x.device)
    library["rms_norm_rows"][(m,)](x, weight, done, x.stride(0), n, eps, BLOCK=triton.next_power_of_2(n))
    y = torch.empty((m, n), dtype=x.dtype, device=x.device)
    _copy[(triton.cdiv(y.numel(), 1024),)](done, y, y.numel(), BLOCK=1024)
    return y
