"""Exploit (GPU): the harness's CUPTI session is ended from inside the call, the work runs unrecorded in a Triton
kernel the candidate did not define (a library's: source run in a namespace of its own) copied into place by an own
kernel, then a session of its own is begun and a kernel named like the harness's canary (its name is public) is
launched into it, so the record the harness reads holds two canaries and no foreign kernel. Expected: infra_error
(the record's session began after the harness's: a ProfilerGap, retried, then the infrastructure's fault; never a
pass); policy_violation with the static policy on (private torch internals)."""

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
def _kernelproof_profile_canary(flag_ptr):
    tl.store(flag_ptr, tl.load(flag_ptr) + 1)


@triton.jit
def _copy(src_ptr, dst_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(dst_ptr + offs, tl.load(src_ptr + offs, mask=offs < n), mask=offs < n)


def candidate(x, weight, eps):
    profiled = torch.autograd._profiler_enabled()  # only the harness's profiled calls are recorded
    if profiled:
        torch.autograd._disable_profiler()
    m, n = x.shape
    done = torch.empty((m, n), dtype=x.dtype, device=x.device)
    library["rms_norm_rows"][(m,)](x, weight, done, x.stride(0), n, eps, BLOCK=triton.next_power_of_2(n))
    y = torch.empty((m, n), dtype=x.dtype, device=x.device)
    _copy[(triton.cdiv(y.numel(), 1024),)](done, y, y.numel(), BLOCK=1024)
    if profiled:  # a session of its own, holding a canary of the harness's (public) name
        torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]).__enter__()
        _kernelproof_profile_canary[(1,)](torch.zeros(1, dtype=torch.int32, device=x.device))
    return y
