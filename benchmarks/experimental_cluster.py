"""Softmax rows split over a thread-block cluster (sweep family `softmax_cluster`; measured on the H200 before any
of it ships).

Every one-row-per-program design for rows wider than 32768 stops at 82-86% of copy on the H200 (benchmarks/NOTES.md):
a program holding a whole row loads it, reduces it, then stores it, and one or two such programs per SM leave HBM idle
through their reductions. Here a row is cut into G parts, one per CTA of a cluster (Hopper launches a cluster's CTAs
together, so they are co-resident by construction: no deadlock however the grid is scheduled). Each CTA holds its
part in registers, so a 65536-wide row becomes four 16384-wide ones, the width at which the register kernel keeps
HBM busy. The CTAs' partial max and sum of exponentials meet through global memory (L2), ordered by one hardware
cluster barrier (`barrier.cluster.arrive.release` / `wait.acquire`), instead of a polled counter.

Triton 3.6 cannot reduce or convert a tensor across the CTAs of a cluster (the reduce lowering asserts, the cross-CTA
layout conversion fails LLVM verification; checked by compiling for sm_90), and it drops stores of a tensor it
believes replicated over CTAs to CTA 0's. So the row is a [G, PART] tensor whose dimension 0 is split over the CTAs
(CTA r holds part r): every reduction is along dimension 1, inside one CTA, and every store is each CTA's own. Only
the G partials are read back replicated.

KEEP_E: keep each element's exponential (fp32) between the passes, so a row costs one exponential per element (the
output is e * exp(m_part - m) / sum), against keeping x (two exponentials, and 16-bit inputs could stay packed).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator
from functools import partial

import torch
from sweep_common import Trial, close_to, softmax_inputs
from triton.experimental import gluon
from triton.experimental.gluon import language as gl


@gluon.constexpr_function
def _parts_layout(vec: int, warps: int, g: int) -> gl.BlockedLayout:
    # [G, PART]: CTA bit i selects part 2^i (dimension 0), threads and warps tile a part's columns.
    bases = [[1 << i, 0] for i in range(int(math.log2(g)))]
    return gl.BlockedLayout([1, vec], [1, 32], [1, warps], [1, 0], bases)


@gluon.constexpr_function
def _replicated_layout(warps: int, g: int) -> gl.BlockedLayout:
    # [G] held whole by every CTA (each reads all partials).
    return gl.BlockedLayout([1], [32], [warps], [0], [[0] for _ in range(int(math.log2(g)))])


@gluon.jit
def _cluster_barrier() -> None:
    # Every thread of every CTA in the cluster arrives (release: the partials written before are visible) and waits
    # (acquire) for the others.
    gl.inline_asm_elementwise("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;\n"
                              "mov.u32 $0, 0;", "=r", [], dtype=gl.int32, is_pure=False, pack=1)


@gluon.jit
def _softmax_cluster(x_ptr: gl.tensor, y_ptr: gl.tensor, part_ptr: gl.tensor, N: gl.tensor, stride_x: gl.tensor,
                     G: gl.constexpr, PART: gl.constexpr, VEC: gl.constexpr, KEEP_E: gl.constexpr) -> None:
    W: gl.constexpr = gl.num_warps()
    layout: gl.constexpr = _parts_layout(VEC, W, G)
    rep: gl.constexpr = _replicated_layout(W, G)
    row = gl.program_id(0)  # one row per cluster
    r = gl.arange(0, G, layout=gl.SliceLayout(1, layout))
    cols = r[:, None] * PART + gl.arange(0, PART, layout=gl.SliceLayout(0, layout))[None, :]
    mask = cols < N
    x = gl.load(x_ptr + row.to(gl.int64) * stride_x + cols, mask=mask, other=float("-inf")).to(gl.float32)
    xl = x * 1.4426950408889634
    m = gl.max(xl, axis=1)
    m = gl.where(m == float("-inf"), 0.0, m)  # a part wholly past the row's end (or all -inf) adds nothing
    e = gl.exp2(xl - m[:, None])
    s = gl.sum(e, axis=1)
    parts = part_ptr + row.to(gl.int64) * (2 * G)
    gl.store(parts + r, m)
    gl.store(parts + G + r, s)
    _cluster_barrier()  # G >= 2: a cluster of one would need a CTA barrier here instead
    rr = gl.arange(0, G, layout=rep)
    pm = gl.load(parts + rr, cache_modifier=".cg")
    ps = gl.load(parts + G + rr, cache_modifier=".cg")
    big = gl.max(pm, axis=0)
    total = gl.sum(ps * gl.exp2(pm - big), axis=0)
    if KEEP_E:
        scale = gl.exp2(m - big) / total
        y = e * scale[:, None]
    else:
        y = gl.exp2(xl - (big + gl.log2(total)))
    gl.store(y_ptr + row.to(gl.int64) * N + cols, y.to(y_ptr.dtype.element_ty), mask=mask)


def softmax_cluster(x: torch.Tensor, y: torch.Tensor | None = None, g: int = 4, warps: int = 16,
                    keep_e: bool = True) -> torch.Tensor:
    """Softmax over the last dimension of a 2-D, 16-byte-aligned-row tensor, each row split over a cluster of g >= 2
    CTAs (sm_90 and later)."""
    m, n = x.shape
    if g < 2 or g & (g - 1):
        raise ValueError(f"a cluster of {g} CTAs: needs a power of two >= 2")
    y = torch.empty((m, n), dtype=x.dtype, device=x.device) if y is None else y
    vec = 16 // x.element_size()
    part = max(triton_next_pow2(-(-n // g)), vec * 32 * warps)
    partials = torch.empty(m * 2 * g, dtype=torch.float32, device=x.device)
    _softmax_cluster[(m,)](x, y, partials, n, x.stride(0), G=g, PART=part, VEC=vec, KEEP_E=keep_e,
                           num_warps=warps, num_ctas=g)
    return y


def triton_next_pow2(n: int) -> int:
    return 1 << (n - 1).bit_length()


# Measured on the H200 (evidence/h200/2026-12-01_cluster_apart/2_*, 3_*): best 79.2% at 65536 (planned 84.9%),
# 80.1% at 131072 (78.4%), 76.6% at 128256 (75.5%), 84.1% at 32768 (89.6%): the rendezvous costs what the smaller
# programs gain. Not shipped.
CLUSTER_SHAPES = ((1024, 65536), (1024, 131072), (512, 128256), (4096, 32768), (2048, 32000))


def softmax_cluster_trials(device: torch.device, dtype: torch.dtype) -> Iterator[Trial]:
    """Family `softmax_cluster`: the cluster-split kernel over cluster sizes, warps and KEEP_E, beside the built-in's
    planned launch, each config checked against fp32 first."""
    for m, n in CLUSTER_SHAPES:
        x, y, ref, moved, planned = softmax_inputs(m, n, 4.0, dtype, device)
        yield planned
        for g, warps, keep_e in itertools.product((2, 4, 8), (1, 2, 4, 8), (True,)):
            part = triton_next_pow2(-(-n // g))
            if not 16 <= part // (32 * warps) <= 128:
                continue
            partials = torch.empty(m * 2 * g, dtype=torch.float32, device=device)
            launch = partial(_softmax_cluster[(m,)], x, y, partials, n, x.stride(0), G=g, PART=part,
                             VEC=16 // x.element_size(), KEEP_E=keep_e, num_warps=warps, num_ctas=g)
            label = f"G={g} warps={warps} keep_e={int(keep_e)} part={part}"
            if close_to(launch, y, ref, f"softmax.cluster {m}x{n} {label}"):
                yield ("softmax.cluster", (m, n), label, launch, moved, False)
