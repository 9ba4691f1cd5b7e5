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
from sweep_common import Trial, close_twice, softmax_inputs
from triton.experimental import gluon
from triton.experimental.gluon import language as gl

_LOG2E = gl.constexpr(1.4426950408889634)
# A sibling that never publishes (it cannot, co-resident by the cluster; this is a sweep) gives a wrong row, which
# the check before timing reports, instead of a hung device call. A healthy rendezvous polls once to a few times
# (a poll is an L2 round trip, 1-3 us under load); the sweeps at 12f2c78 / 3e2ec84 ran with 1 << 20.
_MAX_POLLS = gl.constexpr(1 << 14)


@gluon.jit
def _parts(G: gl.constexpr, PART: gl.constexpr, VEC: gl.constexpr) -> tuple[gl.tensor, gl.tensor, gl.tensor]:
    # This CTA's part index r (dimension 0 of [G, PART], split over the cluster), its columns, and [G] replicated.
    layout: gl.constexpr = _parts_layout(VEC, gl.num_warps(), G)
    r = gl.arange(0, G, layout=gl.SliceLayout(1, layout))
    cols = r[:, None] * PART + gl.arange(0, PART, layout=gl.SliceLayout(0, layout))[None, :]
    return r, cols, gl.arange(0, G, layout=_replicated_layout(gl.num_warps(), G))


@gluon.jit
def _row_stats(h: gl.tensor) -> tuple[gl.tensor, gl.tensor, gl.tensor]:
    # A part's max (-inf when empty), the max used as the shift, exponentials.
    xf = h.to(gl.float32)
    m = gl.max(xf, axis=1)
    m_safe = gl.where(m == float("-inf"), 0.0, m)
    return m, m_safe, gl.exp2((xf - m_safe[:, None]) * _LOG2E)


@gluon.jit
def _publish(words: gl.tensor, r: gl.tensor, m: gl.tensor, s: gl.tensor, live: gl.tensor) -> None:
    word = (m.to(gl.uint32, bitcast=True).to(gl.uint64) << 32) | s.to(gl.uint32, bitcast=True).to(gl.uint64)
    gl.store(words + r, word.to(gl.int64, bitcast=True), mask=live)


@gluon.jit
def _poll(got: gl.tensor, words: gl.tensor, rr: gl.tensor) -> tuple[gl.tensor, gl.tensor]:
    # got: the row's G words as first loaded; polled until none is zero, then each part's max and sum.
    polls = 0
    while (gl.min((got != 0).to(gl.int32), axis=0) == 0) & (polls < _MAX_POLLS):
        got = gl.load(words + rr, volatile=True)
        polls += 1
    return (got >> 32).to(gl.int32).to(gl.float32, bitcast=True), got.to(gl.int32).to(gl.float32, bitcast=True)


@gluon.jit
def _scale(got: gl.tensor, words: gl.tensor, rr: gl.tensor, m_safe: gl.tensor) -> gl.tensor:
    # This CTA's part's factor exp(m - max) / sum, from the row's words (_poll).
    pm, ps = _poll(got, words, rr)
    big = gl.max(pm, axis=0)
    return gl.exp2((m_safe - big) * _LOG2E) / gl.sum(ps * gl.exp2((pm - big) * _LOG2E), axis=0)


@gluon.jit
def _clear(w_ptr: gl.tensor, r: gl.tensor, pid: gl.tensor, M: gl.tensor, n_prog: gl.tensor, G: gl.constexpr) -> None:
    if G > 1:  # every CTA of the cluster has read every word it polls: clear this CTA's own
        _cluster_barrier()
    for row in range(pid, M, n_prog):
        gl.store(w_ptr + row.to(gl.int64) * G + r, gl.zeros_like(r).to(gl.int64))


@gluon.jit
def _softmax_cluster_rows(x_ptr: gl.tensor, y_ptr: gl.tensor, w_ptr: gl.tensor, M: gl.tensor, N: gl.tensor,
                          stride_x: gl.tensor, G: gl.constexpr, PART: gl.constexpr, VEC: gl.constexpr,
                          KEEP_E: gl.constexpr) -> None:
    r, cols, rr = _parts(G, PART, VEC)
    mask = cols < N
    pid = gl.program_id(0)  # the cluster
    n_prog = gl.num_programs(0)
    x = gl.load(x_ptr + pid.to(gl.int64) * stride_x + cols, mask=mask & (pid < M), other=float("-inf"))
    for row in range(pid, M, n_prog):
        nxt = row + n_prog
        x_next = gl.load(x_ptr + nxt.to(gl.int64) * stride_x + cols, mask=mask & (nxt < M), other=float("-inf"))
        m, m_safe, e = _row_stats(x)
        words = w_ptr + row.to(gl.int64) * G
        _publish(words, r, m, gl.sum(e, axis=1), row < M)
        scale = _scale(gl.load(words + rr, volatile=True), words, rr, m_safe)
        if KEEP_E:
            y = e * scale[:, None]
        else:
            y = gl.exp2((x.to(gl.float32) - m_safe[:, None]) * _LOG2E) * scale[:, None]
        gl.store(y_ptr + row.to(gl.int64) * N + cols, y.to(y_ptr.dtype.element_ty), mask=mask)
        x = x_next
    _clear(w_ptr, r, pid, M, n_prog, G)


@gluon.jit
def _softmax_cluster_deferred(x_ptr: gl.tensor, y_ptr: gl.tensor, w_ptr: gl.tensor, M: gl.tensor, N: gl.tensor,
                              stride_x: gl.tensor, G: gl.constexpr, PART: gl.constexpr, VEC: gl.constexpr,
                              KEEP_E: gl.constexpr) -> None:
    # As _softmax_cluster_rows with the rendezvous a row later: while row r's words travel, the CTA reduces row r + 1
    # (publishing its word) with row r + 2 in flight, and only then finishes row r, whose words' poll was issued
    # before row r + 1's reduction so that its round trip overlaps it.
    r, cols, rr = _parts(G, PART, VEC)
    mask = cols < N
    pid = gl.program_id(0)
    n_prog = gl.num_programs(0)
    x0 = gl.load(x_ptr + pid.to(gl.int64) * stride_x + cols, mask=mask & (pid < M), other=float("-inf"))
    r1 = pid + n_prog
    x1 = gl.load(x_ptr + r1.to(gl.int64) * stride_x + cols, mask=mask & (r1 < M), other=float("-inf"))
    m0, m0_safe, e0 = _row_stats(x0)
    _publish(w_ptr + pid.to(gl.int64) * G, r, m0, gl.sum(e0, axis=1), pid < M)
    if KEEP_E:
        h0 = e0
    else:
        h0 = x0
    for row in range(pid, M, n_prog):
        r1 = row + n_prog
        r2 = r1 + n_prog
        x2 = gl.load(x_ptr + r2.to(gl.int64) * stride_x + cols, mask=mask & (r2 < M), other=float("-inf"))
        words = w_ptr + row.to(gl.int64) * G
        got = gl.load(words + rr, volatile=True)
        m1, m1_safe, e1 = _row_stats(x1)
        _publish(w_ptr + r1.to(gl.int64) * G, r, m1, gl.sum(e1, axis=1), r1 < M)
        scale = _scale(got, words, rr, m0_safe)
        if KEEP_E:
            y = h0 * scale[:, None]
            h0 = e1
        else:
            y = gl.exp2((h0.to(gl.float32) - m0_safe[:, None]) * _LOG2E) * scale[:, None]
            h0 = x1
        gl.store(y_ptr + row.to(gl.int64) * N + cols, y.to(y_ptr.dtype.element_ty), mask=mask)
        m0_safe = m1_safe
        x1 = x2
    _clear(w_ptr, r, pid, M, n_prog, G)


def cluster_rows(x: torch.Tensor, y: torch.Tensor, words: torch.Tensor, g: int, warps: int, clusters: int,
                 keep_e: bool, deferred: bool = False) -> object:
    """Softmax of x's rows (2-D, unit column stride) into y (contiguous) on `clusters` persistent clusters of g CTAs;
    words: int64, at least rows x g, zero (the kernel leaves it zero)."""
    m, n = x.shape
    part = triton_next_pow2(-(-n // g))
    kernel = _softmax_cluster_deferred if deferred else _softmax_cluster_rows
    return kernel[(clusters,)](x, y, words, m, n, x.stride(0), G=g, PART=part,
                               VEC=16 // x.element_size(), KEEP_E=keep_e, num_warps=warps, num_ctas=g)


# Measured on the H200 (bf16, CUPTI, evidence/h200/2026-12-05_cluster_rows/): best 64.6% of copy at 1024 x 65536
# (G=2, planned 81.8%), 55.2% at 1024 x 131072 (75.6%), 51.9% at 512 x 128256 (72.0%); more CTAs a row, slower.
# The deferred kernel, its rendezvous overlapping the next row's reduction, was slower still (26-38%, `2_*`): about
# 3 us a row whatever the part's size, so what holds both back is one register-held part an SM in flight per
# loaded-memory latency, not the rendezvous (benchmarks/NOTES.md; experimental_cluster_resident.py follows from it).
SHAPES = ((1024, 65536), (1024, 131072), (512, 128256))


# (G, warps) of the deferred kernel that build without spilling much for sm_90 (compile-only, ptxas -v): at 65536
# wide G=4 on 16 warps 128 registers (28-32 bytes spilled), G=8 on 16 warps 85-98, on 8 warps 151-179; at 128256-131072
# G=8 on 16 warps 128 (28-32 bytes); 64 elements a thread or more spill kilobytes. One CTA an SM each.
_DEFERRED = {65536: ((4, 16), (8, 16), (8, 8)), 131072: ((8, 16),)}


def _configs(n: int, n_sm: int) -> Iterator[tuple[int, int, int, bool]]:
    for g, warps in _DEFERRED[triton_next_pow2(n)]:
        for clusters, keep_e in itertools.product(sorted({n_sm // g, (n_sm // (2 * g)) * 2}), (True, False)):
            yield g, warps, clusters, keep_e


def softmax_cluster_rows_trials(device: torch.device, dtype: torch.dtype) -> Iterator[Trial]:
    """Family `softmax_cluster_rows`: the deferred cluster kernel over cluster sizes, warps, clusters and KEEP_E,
    beside the built-in's planned launch and the undeferred kernel's best config from the first run; each config
    checked against fp32 twice (the second launch relies on the first having cleared its words)."""
    n_sm = torch.cuda.get_device_properties(device).multi_processor_count
    for m, n in SHAPES:
        x, y, ref, moved, planned = softmax_inputs(m, n, 4.0, dtype, device)
        yield planned
        words = torch.zeros(m * 8, dtype=torch.int64, device=device)
        configs = [(2, 16, n_sm // 2, False, False)] + [(*c, True) for c in _configs(n, n_sm)]
        for g, warps, clusters, keep_e, deferred in configs:
            launch = partial(cluster_rows, x, y, words, g, warps, clusters, keep_e, deferred)
            label = f"{'deferred ' if deferred else ''}G={g} warps={warps} clusters={clusters} keep_e={int(keep_e)}"
            name = f"softmax.cluster_rows {m}x{n} {label}"
            if close_twice(launch, y, ref, name):
                yield ("softmax.cluster_rows", (m, n), label, launch, moved, False)
