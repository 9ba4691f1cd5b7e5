"""Launch variants of the built-in row kernels (what benchmarks/kernel_sweep.py sweeps and a plan may pick) compute
the same bits: dropping the masks (EVEN), re-reading the tile instead of holding it (REREAD) or cache hints (EVICT,
STREAM) change how memory is touched, never the result. Runs the kernels themselves (interpreted on the CPU, compiled
on a GPU)."""

from __future__ import annotations

import itertools

import pytest
import torch

from kernelproof_core.kernels import rms_norm, softmax
from tests.conftest import HAS_CUDA

DEVICE = torch.device("cuda" if HAS_CUDA else "cpu")


@pytest.mark.parametrize(("m", "n", "block_m"), [(8, 256, 2), (6, 200, 2), (5, 64, 4)])
def test_rms_norm_row_kernel_variants_agree_bit_for_bit(m: int, n: int, block_m: int) -> None:
    gen = torch.Generator().manual_seed(3)
    x = torch.randn(m, n, generator=gen).to(torch.bfloat16).to(DEVICE)
    w = (1 + 0.1 * torch.randn(n, generator=gen)).to(torch.bfloat16).to(DEVICE)
    block_n = 1 << (n - 1).bit_length()
    even_ok = block_n == n and m % block_m == 0
    outs = {}
    for even, reread, stream in itertools.product((False, True), (False, True), (False, True)):
        if even and not even_ok:
            continue
        y = torch.full_like(x, float("nan"))
        rms_norm._rms_norm_rows[(-(-m // block_m),)](x, w, y, m, n, n, 1e-6, BLOCK_M=block_m, BLOCK_N=block_n,
                                                      ALIGN=rms_norm._align(2, n), EVEN=even, REREAD=reread,
                                                      STREAM=stream)
        outs[(even, reread, stream)] = y
    ref = (x.float() * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + 1e-6) * w.float())
    base = outs[(False, False, False)]
    assert (base.float() - ref).abs().max().item() < 0.05
    assert len(outs) == (8 if even_ok else 4)
    for key, y in outs.items():
        assert torch.equal(y, base), key


@pytest.mark.parametrize(("m", "n", "block_m"), [(8, 256, 2), (6, 200, 4)])
def test_softmax_row_kernel_with_and_without_masks_agree_bit_for_bit(m: int, n: int, block_m: int) -> None:
    x = torch.randn(m, n, generator=torch.Generator().manual_seed(5)).to(torch.bfloat16).to(DEVICE)
    block_n = 1 << (n - 1).bit_length()
    outs = []
    evens = (False, True) if block_n == n and m % block_m == 0 else (False,)
    for even, reread, evict, stream in itertools.product(evens, (False, True), (False, True), (False, True)):
        y = torch.full_like(x, float("nan"))
        softmax._softmax_rows[(-(-m // block_m),)](x, y, m, n, n, BLOCK_M=block_m, BLOCK_N=block_n,
                                                   ALIGN=softmax._align(2, n), EVEN=even, REREAD=reread,
                                                   EVICT=evict, STREAM=stream)
        outs.append(y)
    assert (outs[0].float() - torch.softmax(x.float(), -1)).abs().max().item() < 0.01
    assert all(torch.equal(y, outs[0]) for y in outs)
