"""Exploit: PyTorch computes the result with torch's dispatch modes disabled (so a dispatch tracer sees nothing) and a
Triton kernel of its own copies it into the output. Expected: no_kernel_launch (interpreter: the copy kernel reads
memory of unknown origin; GPU: the softmax kernel's share of GPU time, seen by CUPTI)."""

import torch
import triton
import triton.language as tl


@triton.jit
def _copy(src_ptr, dst_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(dst_ptr + offs, tl.load(src_ptr + offs, mask=offs < n), mask=offs < n)


def candidate(x):
    with torch._C._DisableTorchDispatch():
        tmp = torch.softmax(x.float(), dim=-1).to(x.dtype).contiguous()
        y = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    _copy[(triton.cdiv(y.numel(), 1024),)](tmp, y, y.numel(), BLOCK=1024)
    return y
