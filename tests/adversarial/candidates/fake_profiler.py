"""Exploit: the profiler the harness reads is patched so its record drops the kernels that did the work. A Triton
kernel the candidate did not define (a library's: source run in a namespace of its own) computes the result and an
own kernel copies it into place; on a GPU CUPTI's record would show the library kernel as foreign, so the event
list torch.profiler hands back is filtered to leave it out. Expected: tampering (the profiler's class changed after
the harness snapshot); policy_violation with the static policy on."""

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

_kineto = torch.profiler.profiler._KinetoProfile
_events = _kineto.events


def _without_library(self):
    kept = [e for e in _events(self) if "rms_norm_rows" not in e.name]
    return type(_events(self))(kept)


_kineto.events = _without_library


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
