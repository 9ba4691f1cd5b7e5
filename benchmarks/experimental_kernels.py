"""Kernel designs under evaluation: swept by kernel_sweep.py on the H200, not shipped until they win there.

`rms_norm_split`: rms_norm for rows too wide for one program's registers (the built-in loops over such a row twice in
one program, 30% of copy bandwidth on the campaign's unaligned 345 x 64803 case). Like softmax's split path
(kernelproof_core/kernels/softmax.py): one program per chunk of a row keeps its chunk in registers, publishes its sum
of squares on the row's counter, waits for its siblings, then scales and stores: one HBM read and one write, and
n_parts times the programs. Needs a GPU that runs a row's programs at once: never under the interpreter with more
than one chunk per row.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from kernelproof_core.kernels.rms_norm import _align


@triton.jit
def _rms_norm_split(x_ptr: tl.tensor, w_ptr: tl.tensor, y_ptr: tl.tensor, part_ptr: tl.tensor, count_ptr: tl.tensor,
                    N: tl.tensor, stride_x: tl.tensor, eps: tl.tensor, n_parts: tl.tensor, CHUNK: tl.constexpr,
                    BLOCK_S: tl.constexpr, ALIGN: tl.constexpr) -> None:
    N = (N // ALIGN) * ALIGN
    stride_x = (stride_x // ALIGN) * ALIGN
    pid = tl.program_id(0)
    row = pid // n_parts
    part = pid % n_parts
    cols = part * CHUNK + tl.arange(0, CHUNK)
    mask = cols < N
    x = tl.load(x_ptr + row.to(tl.int64) * stride_x + cols, mask=mask, other=0.0).to(tl.float32)
    at = part_ptr + row.to(tl.int64) * n_parts
    tl.store(at + part, tl.sum(x * x, axis=0))
    tl.debug_barrier()  # every thread's stores are ordered before the release below
    tl.atomic_add(count_ptr + row, 1, sem="release")
    while tl.atomic_add(count_ptr + row, 0, sem="acquire") < n_parts:
        pass
    tl.debug_barrier()
    slots = tl.arange(0, BLOCK_S)
    # .cg: the partials were written by other SMs; never serve them from this SM's L1. Summed in slot order: replays
    # are bit-exact.
    sq = tl.load(at + slots, mask=slots < n_parts, other=0.0, cache_modifier=".cg")
    inv = tl.rsqrt(tl.sum(sq, axis=0) / N + eps)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(y_ptr + row.to(tl.int64) * N + cols, (x * inv * w).to(y_ptr.dtype.element_ty), mask=mask)


def rms_norm_split(x: torch.Tensor, weight: torch.Tensor, eps: float, chunk: int, warps: int,
                   y: torch.Tensor | None = None) -> torch.Tensor:
    """RMSNorm over the last dim of a 2-D x with unit column stride, `chunk` elements per program."""
    m, n = x.shape
    y = torch.empty((m, n), dtype=x.dtype, device=x.device) if y is None else y
    n_parts = triton.cdiv(n, chunk)
    partials = torch.empty((m, n_parts), dtype=torch.float32, device=x.device)
    done = torch.zeros((m,), dtype=torch.int32, device=x.device)
    _rms_norm_split[(m * n_parts,)](x, weight, y, partials, done, n, x.stride(0), eps, n_parts, CHUNK=chunk,
                                    BLOCK_S=triton.next_power_of_2(n_parts),
                                    ALIGN=_align(x.element_size(), n, x.stride(0)), num_warps=warps)
    return y
