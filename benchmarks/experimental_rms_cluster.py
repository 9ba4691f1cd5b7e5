"""rms_norm rows split over a thread-block cluster (sweep family `rms_norm_cluster`; not shipped: on the H200, bf16,
CUPTI, evidence/h200/2026-12-02_pending_runs/1_*, G = 8 won at aligned 1024 x 65536, 74.3% of copy against the split
path's 69.6%, and 800 x 60000, 70.9% against 66.2%, and lost at 1024 x 40000, 512 x 100000 and on every row off the
16-byte grid, 32-44% against 51-57%).

Why: rms_norm rows too wide for one program take the split path, whose programs meet through a polled per-row
counter in global memory: 63-70% of copy bandwidth on aligned rows and 49-57% on rows off the 16-byte grid, where
softmax's resident path reaches 76-84% (benchmarks/NOTES.md). A program spins on the counter while holding its
chunk, so the rendezvous costs residency. Here a row is cut into G parts, one per CTA of a cluster (Hopper launches
a cluster's CTAs together: co-resident by construction), each part held in registers; the G sums of squares meet
through L2 behind one hardware cluster barrier (experimental_cluster.py's softmax form, whose layouts and barrier
this reuses). The weight is loaded before the barrier, so its latency overlaps the rendezvous.

REALIGN (contiguous 16-bit rows whose width is not a multiple of 8): the row is seen through the window of the
output's whole vectors that covers it (as the shipped realigned kernels see rows): 16-byte accesses for the vectors
wholly inside the row, masked per vector; the row's part of its two edge vectors is read by every CTA (a tile
replicated over the cluster, so each adds the same edge sum to the total) and stored once (Triton stores a tensor
replicated over a cluster's CTAs from CTA 0 only).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator
from functools import partial

import torch
from experimental_cluster import _cluster_barrier, _parts_layout, _replicated_layout, triton_next_pow2
from sweep_common import Trial, rms_norm_close, rms_norm_inputs, rms_norm_planned, rms_norm_ref
from triton.experimental import gluon
from triton.experimental.gluon import language as gl


@gluon.constexpr_function
def _edge_layout(vec: int, warps: int, g: int) -> gl.BlockedLayout:
    # [2, VEC] (a row's first and last vectors), held whole by every CTA of the cluster.
    return gl.BlockedLayout([1, vec], [2, 16], [1, warps], [1, 0], [[0, 0] for _ in range(int(math.log2(g)))])


@gluon.jit
def _rms_norm_cluster(x_ptr: gl.tensor, w_ptr: gl.tensor, y_ptr: gl.tensor, part_ptr: gl.tensor, N: gl.tensor,
                      stride_x: gl.tensor, eps: gl.tensor, G: gl.constexpr, PART: gl.constexpr, VEC: gl.constexpr,
                      REALIGN: gl.constexpr) -> None:
    W: gl.constexpr = gl.num_warps()
    layout: gl.constexpr = _parts_layout(VEC, W, G)
    rep: gl.constexpr = _replicated_layout(W, G)
    row = gl.program_id(0)  # one row per cluster
    r = gl.arange(0, G, layout=gl.SliceLayout(1, layout))
    pos = r[:, None] * PART + gl.arange(0, PART, layout=gl.SliceLayout(0, layout))[None, :]
    if REALIGN:
        start = row.to(gl.int64) * N
        base = (start // VEC) * VEC
        shift = (start - base).to(gl.int32)  # where the row begins inside its first vector
        first = (pos // VEC) * VEC  # each element's vector's first window position
        mask = (first >= shift) & (first + VEC <= shift + N)
        x_at = x_ptr + base
        y_at = y_ptr + base
    else:
        shift = 0
        mask = pos < N
        x_at = x_ptr + row.to(gl.int64) * stride_x
        y_at = y_ptr + row.to(gl.int64) * N
    x = gl.load(x_at + pos, mask=mask, other=0.0).to(gl.float32)
    w = gl.load(w_ptr + (pos - shift), mask=mask, other=0.0)  # before the barrier: its latency overlaps the wait
    parts = part_ptr + row.to(gl.int64) * G
    gl.store(parts + r, gl.sum(x * x, axis=1))
    _cluster_barrier()
    rr = gl.arange(0, G, layout=rep)
    total = gl.sum(gl.load(parts + rr, cache_modifier=".cg"), axis=0)
    if REALIGN:
        e_layout: gl.constexpr = _edge_layout(VEC, W, G)
        e_start = gl.where(gl.arange(0, 2, layout=gl.SliceLayout(1, e_layout)) == 0, 0,
                           ((shift + N - 1) // VEC) * VEC)[:, None]
        e_offs = e_start + gl.arange(0, VEC, layout=gl.SliceLayout(0, e_layout))[None, :]
        e_inside = (e_start >= shift) & (e_start + VEC <= shift + N)
        e_mask = (e_offs >= shift) & (e_offs < shift + N) & ~e_inside
        x_e = gl.load(x_at + e_offs, mask=e_mask, other=0.0).to(gl.float32)
        total += gl.sum(gl.sum(x_e * x_e, axis=1), axis=0)
        inv = gl.rsqrt(total / N + eps)
        w_e = gl.load(w_ptr + (e_offs - shift), mask=e_mask, other=0.0).to(gl.float32)
        gl.store(y_at + e_offs, (x_e * inv * w_e).to(y_ptr.dtype.element_ty), mask=e_mask)
    else:
        inv = gl.rsqrt(total / N + eps)
    gl.store(y_at + pos, (x * inv * w.to(gl.float32)).to(y_ptr.dtype.element_ty), mask=mask)


def rms_norm_cluster(x: torch.Tensor, w: torch.Tensor, eps: float, y: torch.Tensor, g: int, warps: int
                     ) -> torch.Tensor:
    """RMSNorm of a 2-D 16-bit x, each row over a cluster of g CTAs (a power of two, 2-8; sm_90 and later); rows
    off the 16-byte grid through their vector windows (contiguous rows only)."""
    m, n = x.shape
    vec = 16 // x.element_size()
    realign = n % vec != 0 or x.stride(0) % vec != 0
    if realign and x.stride(0) != n:
        raise ValueError("padded rows off the 16-byte grid: x's and y's vectors would not line up")
    part = max(triton_next_pow2(-(-(n + vec - 1 if realign else n) // g)), vec * 32 * warps)
    partials = torch.empty(m * g, dtype=torch.float32, device=x.device)
    _rms_norm_cluster[(m,)](x, w, y, partials, n, x.stride(0), eps, G=g, PART=part, VEC=vec, REALIGN=realign,
                            num_warps=warps, num_ctas=g)
    return y


CLUSTER_SHAPES = ((425, 52717), (345, 64803), (270, 63553), (2048, 24577), (1024, 65536), (1024, 40000), (800, 60000),
                  (512, 100000))


def rms_norm_cluster_trials(device: torch.device, dtype: torch.dtype) -> Iterator[Trial]:
    """Family `rms_norm_cluster`: the cluster-split kernel over cluster sizes and warps beside the planned launch
    (split path), each config checked against fp32 before it is timed."""
    for m, n in CLUSTER_SHAPES:
        x, w, y, moved = rms_norm_inputs(m, n, dtype, device)
        yield rms_norm_planned(x, w, moved)
        ref = rms_norm_ref(x, w)
        for g, warps in itertools.product((2, 4, 8), (2, 4, 8)):
            per_thread = triton_next_pow2(-(-(n + 7) // g)) // (32 * warps)
            if not 16 <= per_thread <= 64:
                continue
            label = f"G={g} warps={warps} per_thread={per_thread}"
            run = partial(rms_norm_cluster, x, w, 1e-6, y, g, warps)
            y.fill_(float("nan"))
            run()
            if not rms_norm_close(y, ref, f"rms_norm.cluster {m}x{n} {label}"):
                continue
            yield ("rms_norm.cluster", (m, n), label, run, moved, False)
