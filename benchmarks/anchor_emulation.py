"""ANCHOR's arithmetic emulated in float64 with float32 roundings, on the CPU: does the algebra (per-warp anchors,
one rounded multiply a row, fused multiply-adds, the merge `2^(log2 sum + (anchor - shift))`, the redo where a sum
is not finite) agree with CARRY's on offset logits? The GPU build is another matter (benchmarks/anchor_offset_probe.py
looks there). Layout as the resident kernel's aligned rows: T threads, K contiguous elements a thread a chunk, warps
of 32 consecutive threads; the exponentials are exact (the GPU's ex2.approx is within 2 ulp).

    python benchmarks/anchor_emulation.py [--rows 40] [--n 40000] [--threads 256] [--offset 4e8] [--spread 1e6]
"""

from __future__ import annotations

import argparse
import logging
import math

import torch

log = logging.getLogger("anchor_emulation")
LOG2E = torch.tensor(math.log2(math.e), dtype=torch.float32).double()  # the kernels' fp32 constant


def _f32(v: torch.Tensor) -> torch.Tensor:
    return v.float().double()


def _fma(x: torch.Tensor, a: torch.Tensor) -> torch.Tensor:
    """x log2 e - a rounded once (an fp32 product is exact in float64)."""
    return _f32(x * LOG2E - a)


def softmax_row(x: torch.Tensor, threads: int, k: int, anchor: bool) -> tuple[torch.Tensor, bool]:
    """One row's output (rounded to x's dtype) and whether ANCHOR took the redo (CARRY's stats pass again)."""
    n, chunk = x.numel(), threads * k
    padded = torch.full((-(-n // chunk) * chunk,), float("-inf"), dtype=torch.float64)
    padded[:n] = x.double()
    lanes = padded.view(-1, threads, k)
    redo = False
    if anchor:
        warp_anchor = _f32(lanes[0].amax(dim=1).view(-1, 32).amax(dim=1) * LOG2E)
        a_t = warp_anchor.repeat_interleave(32)
        s_t = _f32(torch.exp2(_fma(lanes, a_t[None, :, None])).sum(dim=(0, 2)))
        shift = a_t.max()
        total = _f32(torch.exp2(_f32(_f32(torch.log2(s_t)) + (a_t - shift))).sum())
        redo = not (0 < float(total) < math.inf)
    if not anchor or redo:  # CARRY: every exponent against the row's max times log2 e, rounded once
        shift = _f32(lanes.amax() * LOG2E)
        total = _f32(torch.exp2(_fma(lanes, shift)).sum())
    lsum = _f32(torch.log2(total))
    return _f32(torch.exp2(_f32(_fma(padded[:n], shift) - lsum))).to(x.dtype).double(), redo


def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=40)
    ap.add_argument("--n", type=int, default=40000)
    ap.add_argument("--threads", type=int, default=256)
    ap.add_argument("--offset", type=float, default=4e8)
    ap.add_argument("--spread", type=float, default=1e6)
    opts = ap.parse_args()
    gen = torch.Generator().manual_seed(0)
    redos = parted = outside = 0
    for _ in range(opts.rows):
        x = (torch.randn(opts.n, generator=gen) * opts.spread + opts.offset).to(torch.bfloat16)
        y, redo = softmax_row(x, opts.threads, 8, anchor=True)
        want, _ = softmax_row(x, opts.threads, 8, anchor=False)
        ref = torch.softmax(x.double(), dim=0)
        redos += redo
        parted += bool(((y - want).abs() > 2 * torch.finfo(torch.bfloat16).eps * want.abs()).any())
        outside += bool(((y - ref).abs() > 1e-5 + 0.016 * ref.abs()).any())
    log.info("%d rows of %d at %g (spread %g), %d threads: %d took the redo, %d parted from CARRY by more than two "
             "16-bit steps, %d outside the softmax task's bf16 tolerance", opts.rows, opts.n, opts.offset, opts.spread,
             opts.threads, redos, parted, outside)


if __name__ == "__main__":
    main()
