"""Softmax rows over a persistent thread-block cluster, the next row in flight (sweep family `softmax_cluster_rows`;
measured on the H200 before any of it ships).

Why: every design that holds a whole 65536-131072-wide row on one SM stops at 74-86% of copy on the H200
(benchmarks/NOTES.md), because an SM cannot hold the row it works on and the next one at once, so its loads stop
while it reduces and stores. The one-shot cluster split (experimental_cluster.py) cut the row over G SMs but had
nothing in flight while its CTAs met (79% at 65536). Here each cluster walks rows persistently, CTA r holding part r
of the current row and loading part r of the next row before it reduces the current one: the shape of the realigned
register kernel that reaches 89-92% at 32768 wide, with the part (65536 / G) as its row.

The CTAs meet without a fence or a barrier in the row loop: a release there would wait for the next row's loads
(and the last row's stores) to land and drain the SM. Each CTA publishes its part's (max, sum of exponentials) as one
64-bit word (max bits high, sum bits low: never zero, since a finite max gives a sum of at least 1 and an empty or
all -inf part publishes max = -inf), a single-copy-atomic store whose payload is its own flag, and polls its row's G
words with volatile loads until none is zero. The cluster makes the G CTAs co-resident, so polling cannot deadlock.
Words are per row; the kernel leaves them zero for its next launch (a cluster barrier after the last row, then each
CTA clears its own), so the workspace is zeroed once, when allocated.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from functools import partial

import torch
from experimental_cluster import _cluster_barrier, _parts_layout, _replicated_layout, triton_next_pow2
from sweep_common import Trial, close_to, softmax_inputs
from triton.experimental import gluon
from triton.experimental.gluon import language as gl

_LOG2E = gl.constexpr(1.4426950408889634)
# A sibling that never publishes (it cannot, co-resident by the cluster; this is a sweep) gives a wrong row, which
# the check before timing reports, instead of a hung device call.
_MAX_POLLS = gl.constexpr(1 << 20)


@gluon.jit
def _softmax_cluster_rows(x_ptr: gl.tensor, y_ptr: gl.tensor, w_ptr: gl.tensor, M: gl.tensor, N: gl.tensor,
                          stride_x: gl.tensor, G: gl.constexpr, PART: gl.constexpr, VEC: gl.constexpr,
                          KEEP_E: gl.constexpr) -> None:
    W: gl.constexpr = gl.num_warps()
    layout: gl.constexpr = _parts_layout(VEC, W, G)
    rep: gl.constexpr = _replicated_layout(W, G)
    pid = gl.program_id(0)  # the cluster
    n_prog = gl.num_programs(0)
    r = gl.arange(0, G, layout=gl.SliceLayout(1, layout))
    cols = r[:, None] * PART + gl.arange(0, PART, layout=gl.SliceLayout(0, layout))[None, :]
    mask = cols < N
    rr = gl.arange(0, G, layout=rep)
    x = gl.load(x_ptr + pid.to(gl.int64) * stride_x + cols, mask=mask & (pid < M), other=float("-inf"))
    for row in range(pid, M, n_prog):
        nxt = row + n_prog
        x_next = gl.load(x_ptr + nxt.to(gl.int64) * stride_x + cols, mask=mask & (nxt < M), other=float("-inf"))
        xf = x.to(gl.float32)
        m = gl.max(xf, axis=1)
        m_safe = gl.where(m == float("-inf"), 0.0, m)
        e = gl.exp2((xf - m_safe[:, None]) * _LOG2E)
        s = gl.sum(e, axis=1)
        word = (m.to(gl.uint32, bitcast=True).to(gl.uint64) << 32) | s.to(gl.uint32, bitcast=True).to(gl.uint64)
        words = w_ptr + row.to(gl.int64) * G
        gl.store(words + r, word.to(gl.int64, bitcast=True))
        got = gl.load(words + rr, volatile=True)
        polls = 0
        while (gl.min((got != 0).to(gl.int32), axis=0) == 0) & (polls < _MAX_POLLS):
            got = gl.load(words + rr, volatile=True)
            polls += 1
        pm = (got >> 32).to(gl.int32).to(gl.float32, bitcast=True)
        ps = got.to(gl.int32).to(gl.float32, bitcast=True)
        big = gl.max(pm, axis=0)
        total = gl.sum(ps * gl.exp2((pm - big) * _LOG2E), axis=0)
        scale = gl.exp2((m_safe - big) * _LOG2E) / total
        if KEEP_E:
            y = e * scale[:, None]
        else:
            y = gl.exp2((xf - m_safe[:, None]) * _LOG2E) * scale[:, None]
        gl.store(y_ptr + row.to(gl.int64) * N + cols, y.to(y_ptr.dtype.element_ty), mask=mask)
        x = x_next
    _cluster_barrier()  # every CTA of the cluster has read every word it polls: clear this CTA's own
    for row in range(pid, M, n_prog):
        gl.store(w_ptr + row.to(gl.int64) * G + r, gl.zeros_like(r).to(gl.int64))


def cluster_rows(x: torch.Tensor, y: torch.Tensor, words: torch.Tensor, g: int, warps: int, clusters: int,
                 keep_e: bool) -> object:
    """Softmax of x's rows (2-D, unit column stride) into y (contiguous) on `clusters` persistent clusters of g CTAs;
    words: int64, at least rows x g, zero (the kernel leaves it zero)."""
    m, n = x.shape
    part = triton_next_pow2(-(-n // g))
    return _softmax_cluster_rows[(clusters,)](x, y, words, m, n, x.stride(0), G=g, PART=part,
                                              VEC=16 // x.element_size(), KEEP_E=keep_e, num_warps=warps,
                                              num_ctas=g)


SHAPES = ((1024, 65536), (1024, 131072), (512, 128256), (1991, 33508))


def _configs(n: int, n_sm: int) -> Iterator[tuple[int, int, int, bool]]:
    for g, warps, per_sm, keep_e in itertools.product((2, 4, 8), (4, 8, 16), (1, 2), (True, False)):
        per_thread = triton_next_pow2(-(-n // g)) // (32 * warps)
        if not 8 <= per_thread <= 64 or (keep_e and per_thread > 32) or per_sm * warps > 32:
            continue
        yield g, warps, n_sm * per_sm // g, keep_e


def softmax_cluster_rows_trials(device: torch.device, dtype: torch.dtype) -> Iterator[Trial]:
    """Family `softmax_cluster_rows`: the persistent cluster kernel over cluster sizes, warps, clusters an SM's worth
    and KEEP_E, beside the built-in's planned launch; each config checked against fp32 twice (the second launch
    relies on the first having cleared its words)."""
    n_sm = torch.cuda.get_device_properties(device).multi_processor_count
    for m, n in SHAPES:
        x, y, ref, moved, planned = softmax_inputs(m, n, 4.0, dtype, device)
        yield planned
        words = torch.zeros(m * 8, dtype=torch.int64, device=device)
        for g, warps, clusters, keep_e in _configs(n, n_sm):
            launch = partial(cluster_rows, x, y, words, g, warps, clusters, keep_e)
            label = f"G={g} warps={warps} clusters={clusters} keep_e={int(keep_e)}"
            name = f"softmax.cluster_rows {m}x{n} {label}"
            if close_to(launch, y, ref, name) and close_to(launch, y, ref, name + " (again)"):
                yield ("softmax.cluster_rows", (m, n), label, launch, moved, False)
