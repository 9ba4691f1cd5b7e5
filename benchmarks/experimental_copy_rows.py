"""What a row-at-a-time program can reach at all (sweep family `copy_rows`): a diagnostic, not a candidate.

Every softmax design for rows wider than 32768 stops at 82-86% of copy on the H200 whatever its instruction count
(benchmarks/NOTES.md). This family separates the access pattern from the arithmetic: one program per row (the row in
registers) that only copies it (COPY: each store can issue as its own load lands), or that must see the whole row
before storing any of it (REDUCE: y = x - max(x), one reduction and one subtraction per element, the dependency
softmax has without its exponentials). If REDUCE at 65536 wide stops where softmax does, the limit is the shape of
the work (a whole row read before any of it is written, per SM), not softmax's instructions.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from functools import partial

import torch
import triton
import triton.language as tl
from sweep_common import Trial, close_to, softmax_inputs

from kernelproof_core.kernels import softmax


@triton.jit
def _copy_rows(x_ptr: tl.tensor, y_ptr: tl.tensor, N: tl.tensor, BLOCK: tl.constexpr, REDUCE: tl.constexpr,
               SOFTMAX: tl.constexpr = 0) -> None:
    # SOFTMAX (after REDUCE's question): 1 keeps each exponential in registers (y = e / sum), 2 keeps x and
    # recomputes it with the normalisation folded into the exponent (y = 2^(x log2 e - (max log2 e + log2 sum))),
    # 3 as 2 with the max subtracted first: 2^((x - max) log2 e - log2 sum), one more add an element, but no
    # product that can overflow (max * log2 e does past 2.36e38) and no shift that loses log2 sum to rounding (the
    # folded shift max log2 e + log2 sum does once |max| passes about 1e5).
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < N
    x = tl.load(x_ptr + row * N + cols, mask=mask, other=float("-inf"))
    if SOFTMAX == 1:
        xl = x.to(tl.float32) * 1.4426950408889634
        e = tl.math.exp2(xl - tl.max(xl, axis=0))
        y = (e * (1.0 / tl.sum(e, axis=0))).to(y_ptr.dtype.element_ty)
    elif SOFTMAX == 2:
        m = tl.max(x.to(tl.float32), axis=0) * 1.4426950408889634
        total = tl.sum(tl.math.exp2(x.to(tl.float32) * 1.4426950408889634 - m), axis=0)
        y = tl.math.exp2(x.to(tl.float32) * 1.4426950408889634 - (m + tl.log2(total))).to(y_ptr.dtype.element_ty)
    elif SOFTMAX == 3:  # as 2 with the max subtracted first (exact for every finite logit, one more add)
        m = tl.max(x.to(tl.float32), axis=0)
        lt = tl.log2(tl.sum(tl.math.exp2((x.to(tl.float32) - m) * 1.4426950408889634), axis=0))
        y = tl.math.exp2((x.to(tl.float32) - m) * 1.4426950408889634 - lt).to(y_ptr.dtype.element_ty)
    elif REDUCE:
        xf = x.to(tl.float32)
        y = (xf - tl.max(xf, axis=0)).to(y_ptr.dtype.element_ty)
    else:
        y = x
    tl.store(y_ptr + row * N + cols, y, mask=mask)


def copy_rows(x: torch.Tensor, y: torch.Tensor, reduce: bool, warps: int, softmax_mode: int = 0) -> object:
    """One program per row of x (2-D, contiguous) into y; returns the compiled kernel (registers, spills)."""
    m, n = x.shape
    return _copy_rows[(m,)](x, y, n, BLOCK=triton.next_power_of_2(n), REDUCE=reduce, SOFTMAX=softmax_mode,
                            num_warps=warps)


SHAPES = ((1024, 65536), (2048, 32768), (4096, 16384), (8192, 8192), (16384, 4096))


def copy_rows_trials(device: torch.device, dtype: torch.dtype) -> Iterator[Trial]:
    """Family `copy_rows`: torch's copy and the built-in softmax, then the row copy and the row reduce-then-store
    over warps, at 128 MB each (1 read + 1 write), each checked before it is timed."""
    for m, n in SHAPES:
        x = torch.randn(m, n, dtype=dtype, device=device)
        y = torch.empty_like(x)
        moved = 2 * x.numel() * x.element_size()
        yield ("copy.torch", (m, n), "y.copy_(x)", partial(y.copy_, x), moved, False)
        yield ("softmax.planned", (m, n), "planned", partial(softmax.candidate, x), moved, True)
        ref = (x.float() - x.float().amax(-1, keepdim=True)).to(dtype)
        for reduce, warps in itertools.product((False, True), (4, 8, 16, 32)):
            if not 8 <= n // (32 * warps) <= 64:
                continue
            y.fill_(float("nan"))
            launch = partial(copy_rows, x, y, reduce, warps)
            launch()
            want = ref if reduce else x  # the subtraction's rounding may differ by an ulp from torch's
            close = torch.allclose(y.float(), want.float(), rtol=1e-2, atol=1e-2)
            if not (torch.equal(y, want) or (reduce and close)):
                print(f"copy_rows {m}x{n} reduce={reduce} warps={warps}: WRONG", flush=True)
                continue
            yield ("copy.rows", (m, n), f"{'reduce' if reduce else 'copy'} warps={warps}", launch, moved, False)


SOFTMAX_SHAPES = ((4096, 16384), (8192, 8192), (2048, 16384), (32768, 8192), (4096, 16000))


def softmax_rows_simple_trials(device: torch.device, dtype: torch.dtype) -> Iterator[Trial]:
    """Family `softmax_rows_simple`: the same one-program-per-row kernel computing softmax (exponentials kept, or x
    kept and the exponentials recomputed), beside reduce-then-store and the built-in's planned launch (for 32768
    wide: the persistent realigned kernel, which prefetches the next row)."""
    for m, n in SOFTMAX_SHAPES:
        x, y, ref, moved, planned = softmax_inputs(m, n, 3.0, dtype, device)
        yield planned
        for mode, warps in itertools.product((1, 2, 3), (4, 8, 16)):
            if not 8 <= triton.next_power_of_2(n) // (32 * warps) <= 128:
                continue
            launch = partial(copy_rows, x, y, mode == 0, warps, mode)
            if mode and not close_to(launch, y, ref, f"softmax_rows_simple {m}x{n} mode={mode} warps={warps}"):
                continue
            label = ("reduce", "softmax keep_e", "softmax fold", "softmax subtract")[mode] + f" warps={warps}"
            yield ("rows.simple", (m, n), label, launch, moved, False)
