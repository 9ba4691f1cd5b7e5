"""Softmax rows held in shared memory across a thread-block cluster, two rows ahead in flight (sweep family
`softmax_cluster_resident`; built and compiled for sm_90, to be measured on the H200 before any of it ships).

Why (benchmarks/NOTES.md, `Rows over a persistent cluster`): a wide row's work is held up by the bytes an SM keeps in
flight, not by the rendezvous. Holding rows in registers (experimental_cluster_rows.py) left one 16-32 KB part an SM
in flight per loaded-memory latency (26-65% of copy); the resident kernel's cp.async slots hold a 65536-wide row in
an SM's shared memory but leave no room for the next one (84%), where 32768-wide rows with the whole next row in
flight reached 90.5%. Here a cluster of G CTAs cuts each row in G parts (65536 / 2, or 128256-131072 / 4: 32768
elements, 64 KB of 16-bit values) and each CTA keeps three parts' slots (192 KB): while it writes row r's part it
reduces row r + 1's (landed) and row r + 2's copies fly, so a part's 64 KB of reads stay in flight through the whole
iteration, with no register held by them. Parts meet as in experimental_cluster_rows.py's deferred kernel (64-bit
words that are their own flags, polled a row later; no fence in the loop, so nothing waits for the copies), and the
output is y = 2^((x - max) log2 e - log2 sum) with the row's max and sum from the G words (exact for every finite
logit: nothing is folded into one shift).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from functools import partial

import torch
from experimental_cluster import _replicated_layout
from experimental_cluster_rows import _LOG2E, _clear, _publish, _scale
from experimental_tma_flat import tma_flat_rows
from experimental_tma_rows import LANES, tma_rows
from sweep_common import Trial, close_twice, softmax_inputs
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.ampere import async_copy as cp


@gluon.constexpr_function
def _layout(k: int, warps: int, g: int) -> gl.BlockedLayout:
    # [G, T, K]: CTA bit i selects part 2^i, each thread K contiguous elements of a chunk of T x K.
    return gl.BlockedLayout([1, 1, k], [1, 32, 1], [1, warps, 1], [2, 1, 0],
                            [[1 << i, 0, 0] for i in range(int(math.log2(g)))])


@gluon.constexpr_function
def _slot_layout(g: int) -> gl.SwizzledSharedLayout:
    # [G, T, K]: each CTA holds its own part's slot. Gluon 3.6 cannot index or slice a buffer of slots split over
    # a cluster's CTAs ("rank must be equal to or one less than the shape size"; "non-trivial block dimension"),
    # so every slot is its own allocation, held in a tuple, and the three sets are chosen statically.
    return gl.SwizzledSharedLayout(1, 1, 1, [2, 1, 0], [[1 << i, 0, 0] for i in range(int(math.log2(g)))])


@gluon.constexpr_function
def _wait_asm(pending: int) -> str:
    return f"cp.async.wait_group {pending};\n\tmov.u32 $0, 0;"


@gluon.jit
def _wait(pending: gl.constexpr, cols: gl.tensor, FREE: gl.constexpr) -> None:
    # Until at most `pending` of this thread's copy groups are in flight. FREE: the wait alone, without the CTA
    # barrier Gluon's wait adds for data that other threads copied: every thread here reads only the bytes it copied
    # itself (one layout for the copies and the loads), so the barrier orders nothing, and the control measures it.
    if FREE:
        # one element a thread (cols reduced over its own K), so the wait is emitted once a thread
        gl.inline_asm_elementwise(_wait_asm(pending), "=r,r", [gl.min(cols, axis=2)], dtype=gl.int32, is_pure=False,
                                  pack=1)
    else:
        cp.wait_group(pending)


@gluon.jit
def _copy_part(slots: gl.tuple, FIRST: gl.constexpr, src: gl.tensor, cols: gl.tensor, N: gl.tensor,
               live: gl.tensor, NCH: gl.constexpr, CHUNK: gl.constexpr) -> None:
    # A part's NCH chunks into slots FIRST .. FIRST + NCH - 1, a copy group each (past the last row: no traffic, but
    # the groups are committed all the same, so the counts the waits rely on hold).
    for c in gl.static_range(NCH):
        at = cols + c * CHUNK
        cp.async_copy_global_to_shared(slots[FIRST + c], src + at, mask=(at < N) & live)
        cp.commit_group()


@gluon.jit
def _part_stats(slots: gl.tuple, FIRST: gl.constexpr, cols: gl.tensor, N: gl.tensor, G: gl.constexpr,
                NCH: gl.constexpr, CHUNK: gl.constexpr, layout: gl.constexpr, COPY_ONLY: gl.constexpr = False,
                FREE: gl.constexpr = False) -> tuple[gl.tensor, gl.tensor, gl.tensor]:
    # The part's max (-inf when empty), the max used as the shift (0 then) and the sum of 2^((x - shift) log2 e),
    # chunk c reduced as its group lands (the next part's NCH groups committed after it), per-thread running
    # values, one CTA-wide reduction at the end. COPY_ONLY: only the waits (the pipeline's memory side alone).
    T: gl.constexpr = 32 * gl.num_warps()
    m_t = gl.full([G, T], float("-inf"), gl.float32, gl.SliceLayout(2, layout))
    s_t = gl.zeros([G, T], gl.float32, gl.SliceLayout(2, layout))
    for c in gl.static_range(NCH):
        _wait(2 * NCH - 1 - c, cols, FREE)
        if not COPY_ONLY:
            x = slots[FIRST + c].load(layout).to(gl.float32)
            x = gl.where(cols + c * CHUNK < N, x, float("-inf"))  # masked copies zero-fill
            m_new = gl.maximum(m_t, gl.max(x, axis=2))
            m_use = gl.where(m_new == float("-inf"), 0.0, m_new)
            s_t = s_t * gl.exp2((m_t - m_use) * _LOG2E) + gl.sum(gl.exp2((x - m_use[:, :, None]) * _LOG2E), axis=2)
            m_t = m_new
    m = gl.max(m_t, axis=1)
    m_use = gl.where(m == float("-inf"), 0.0, m)
    return m, m_use, gl.sum(s_t * gl.exp2((m_t - m_use[:, None]) * _LOG2E), axis=1)


@gluon.jit
def _step(slots: gl.tuple, OUT: gl.constexpr, STATS: gl.constexpr, COPY: gl.constexpr, row: gl.tensor,
          n_prog: gl.tensor, x_ptr: gl.tensor, y_ptr: gl.tensor, w_ptr: gl.tensor, M: gl.tensor, N: gl.tensor,
          stride_x: gl.tensor, cols: gl.tensor, r: gl.tensor, rr: gl.tensor, m_use: gl.tensor, G: gl.constexpr,
          l_sum: gl.tensor, NCH: gl.constexpr, CHUNK: gl.constexpr, layout: gl.constexpr,
          LOCAL: gl.constexpr, COPY_ONLY: gl.constexpr, FREE: gl.constexpr) -> tuple[gl.tensor, gl.tensor]:
    # One row: row + 2 n_prog's copies into set COPY, row + n_prog's part reduced from set STATS and published,
    # then row's words (polled before that reduction) and its output from set OUT. Returns row + n_prog's shift and
    # log2 of its part's sum. LOCAL (G = 1 only): no words; the row's own max and sum scale it, which separates the
    # three-deep pipeline's cost from the rendezvous'. COPY_ONLY (with LOCAL): y = x through the same slots and waits.
    r1 = row + n_prog
    r2 = r1 + n_prog
    _copy_part(slots, COPY * NCH, x_ptr + r2.to(gl.int64) * stride_x, cols, N, r2 < M, NCH, CHUNK)
    words = w_ptr + row.to(gl.int64) * G
    if not LOCAL:
        got = gl.load(words + rr, mask=row < M, other=1, volatile=True)  # in flight through row r1's reduction
    m1, m1_use, s1 = _part_stats(slots, STATS * NCH, cols, N, G, NCH, CHUNK, layout, COPY_ONLY, FREE)
    if not LOCAL:
        _publish(w_ptr + r1.to(gl.int64) * G, r, m1, s1, r1 < M)
    if row < M:
        if LOCAL:
            lscale = -l_sum[:, None, None]
        else:
            lscale = gl.log2(_scale(got, words, rr, m_use))[:, None, None]  # exp(m_part - max) / sum, this part
        shift = m_use[:, None, None]
        y_row = y_ptr + row.to(gl.int64) * N
        for c in gl.static_range(NCH):
            at = cols + c * CHUNK
            if COPY_ONLY:
                gl.store(y_row + at, slots[OUT * NCH + c].load(layout), mask=at < N)
            else:
                x = slots[OUT * NCH + c].load(layout).to(gl.float32)
                gl.store(y_row + at, gl.exp2((x - shift) * _LOG2E + lscale).to(y_ptr.dtype.element_ty), mask=at < N)
    return m1_use, gl.log2(s1)


@gluon.jit
def _softmax_cluster_resident(x_ptr: gl.tensor, y_ptr: gl.tensor, w_ptr: gl.tensor, M: gl.tensor, N: gl.tensor,
                              stride_x: gl.tensor, G: gl.constexpr, NCH: gl.constexpr, K: gl.constexpr,
                              LOCAL: gl.constexpr, COPY_ONLY: gl.constexpr, FREE: gl.constexpr) -> None:
    W: gl.constexpr = gl.num_warps()
    T: gl.constexpr = 32 * W
    CHUNK: gl.constexpr = T * K
    PART: gl.constexpr = NCH * CHUNK
    layout: gl.constexpr = _layout(K, W, G)
    N = (N // K) * K  # the host guarantees K divides N and the stride: Triton then sees K-element-aligned rows
    stride_x = (stride_x // K) * K
    slots = ()
    for _ in gl.static_range(3 * NCH):
        slots = slots + (gl.allocate_shared_memory(x_ptr.dtype.element_ty, [G, T, K], _slot_layout(G)),)  # noqa: RUF005
    r = gl.arange(0, G, layout=gl.SliceLayout(1, gl.SliceLayout(2, layout)))
    t = gl.arange(0, T, layout=gl.SliceLayout(0, gl.SliceLayout(2, layout)))
    k = gl.arange(0, K, layout=gl.SliceLayout(0, gl.SliceLayout(1, layout)))
    cols = r[:, None, None] * PART + t[None, :, None] * K + k[None, None, :]  # chunk 0 of each part
    rr = gl.arange(0, G, layout=_replicated_layout(W, G))
    pid = gl.program_id(0)  # the cluster
    n_prog = gl.num_programs(0)
    r1 = pid + n_prog
    _copy_part(slots, 0, x_ptr + pid.to(gl.int64) * stride_x, cols, N, pid < M, NCH, CHUNK)
    _copy_part(slots, NCH, x_ptr + r1.to(gl.int64) * stride_x, cols, N, r1 < M, NCH, CHUNK)
    m0, m_use, s0 = _part_stats(slots, 0, cols, N, G, NCH, CHUNK, layout, COPY_ONLY, FREE)
    if not LOCAL:
        _publish(w_ptr + pid.to(gl.int64) * G, r, m0, s0, pid < M)
    l_sum = gl.log2(s0)
    for row in range(pid, M, 3 * n_prog):  # three rows an iteration, so that each set's role is static
        m_use, l_sum = _step(slots, 0, 1, 2, row, n_prog, x_ptr, y_ptr, w_ptr, M, N, stride_x, cols, r, rr, m_use, G,
                             l_sum, NCH, CHUNK, layout, LOCAL, COPY_ONLY, FREE)
        m_use, l_sum = _step(slots, 1, 2, 0, row + n_prog, n_prog, x_ptr, y_ptr, w_ptr, M, N, stride_x, cols, r, rr,
                             m_use, G, l_sum, NCH, CHUNK, layout, LOCAL, COPY_ONLY, FREE)
        m_use, l_sum = _step(slots, 2, 0, 1, row + 2 * n_prog, n_prog, x_ptr, y_ptr, w_ptr, M, N, stride_x, cols, r,
                             rr, m_use, G, l_sum, NCH, CHUNK, layout, LOCAL, COPY_ONLY, FREE)
    cp.wait_group(0)
    if not LOCAL:
        _clear(w_ptr, r, pid, M, n_prog, G)


def cluster_resident(x: torch.Tensor, y: torch.Tensor, words: torch.Tensor, g: int, warps: int,
                     clusters: int, local: bool = False, copy: bool = False, free: bool = False) -> object:
    """Softmax of x's rows (2-D, unit column stride, rows starting on 4-byte boundaries at least) into y (contiguous)
    on `clusters` persistent clusters of g CTAs; words: int64, at least rows x g, zero (the kernel leaves it zero).
    Copies are 16 bytes where rows start on 16-byte boundaries, else 8 or 4 (cp.async copies nothing smaller).
    local (g = 1 only): no words, each row scaled by its own stats (the pipeline without the rendezvous); copy (with
    local): y = x through the same pipeline, no arithmetic (its memory side alone); free: the chunk waits without
    Gluon's CTA barrier (each thread reads only what it copied)."""
    if (local or copy) and (g != 1 or not local):
        raise ValueError("local needs a cluster of one, copy needs local")
    m, n = x.shape
    size = x.element_size()

    def misaligned(k: int) -> bool:
        return bool(n % k or x.stride(0) % k or x.data_ptr() % (k * size) or y.data_ptr() % (k * size))

    k = 16 // size
    while k * size > 4 and misaligned(k):
        k //= 2
    if misaligned(k):
        raise ValueError(f"rows of {n} (stride {x.stride(0)}) do not start on 4-byte boundaries")
    chunk = 32 * warps * k
    nch = -(-n // (g * chunk))
    return _softmax_cluster_resident[(clusters,)](x, y, words, m, n, x.stride(0), G=g, NCH=nch, K=k,
                                                  LOCAL=local, COPY_ONLY=copy, FREE=free, num_warps=warps, num_ctas=g)


SHAPES = ((1024, 65536), (1024, 131072), (512, 128256), (1991, 33508), (2048, 32768))
# (G, warps, CTAs an SM) per shape: three parts of 32768 16-bit elements (192 KB) hold one CTA an SM; of 16384
# (96 KB) two, from two clusters; random2's 1991 x 33508 (rows on 8-byte boundaries: 8-byte copies) in two parts of
# 18432 (108 KB). G = 1 is the same three-deep pipeline on one SM (a launch without a cluster; every CTA is a
# cluster of one): 32768-33508-wide rows whole, three of them in 192-204 KB. sm_90 builds (compile-only, ptxas -v):
# 47-64 registers on 16-32 warps, 80 on 8, no spills.
_CONFIGS = {65536: ((2, 16, 1), (2, 8, 1), (4, 16, 2), (4, 8, 2)),
            131072: ((4, 16, 1), (4, 8, 1), (8, 16, 2), (8, 8, 2)),
            128256: ((4, 16, 1), (4, 8, 1), (8, 16, 2), (8, 8, 2)),
            33508: ((1, 16, 1), (2, 16, 1), (2, 16, 2), (2, 8, 2)),
            32768: ((1, 16, 1), (1, 32, 1), (2, 16, 1), (2, 16, 2), (2, 8, 2))}


def _configs(n: int, n_sm: int) -> Iterator[tuple[int, int, int]]:
    # Clusters: an SM's worth, and whole pairs of clusters (a GPC of 18 SMs holds four clusters of four, not 4.5);
    # pairs of SMs one short where a GPC's SM count is odd. A cluster that cannot start until another has finished
    # all its rows doubles the time, so these fix what the sweep's best can reach more than they tune it.
    for g, warps, per_sm in _CONFIGS[n]:
        counts = {n_sm * per_sm // g, (n_sm // (2 * g)) * 2 * per_sm}
        if g == 2 and n >= 65536:
            counts.add((n_sm // g - 2) * per_sm)
        for clusters in sorted(counts):
            yield g, warps, clusters


def softmax_cluster_resident_trials(device: torch.device, dtype: torch.dtype) -> Iterator[Trial]:
    """Family `softmax_cluster_resident`: the kernel over cluster sizes, warps and clusters (an SM's worth each, and
    whole pairs), beside the built-in's planned launch; each config checked against fp32 twice (the second launch
    relies on the first having cleared its words)."""
    n_sm = torch.cuda.get_device_properties(device).multi_processor_count
    for m, n in SHAPES:
        x, y, ref, moved, planned = softmax_inputs(m, n, 4.0, dtype, device)
        yield planned
        words = torch.zeros(m * 8, dtype=torch.int64, device=device)
        for g, warps, clusters in _configs(n, n_sm):
            launch = partial(cluster_resident, x, y, words, g, warps, clusters)
            label = f"G={g} warps={warps} clusters={clusters}"
            name = f"softmax.cluster_resident {m}x{n} {label}"
            if close_twice(launch, y, ref, name):
                yield ("softmax.cluster_resident", (m, n), label, launch, moved, False)


def softmax_pipeline_local_trials(device: torch.device, dtype: torch.dtype) -> Iterator[Trial]:
    """Family `softmax_pipeline_local`: why G = 1 (three 32768-wide rows in shared memory on one SM, 64 KB of copies
    always in flight) measured 68% where the register plan reaches 92% (`2026-12-05_cluster_resident`): the same
    pipeline with words, without them (each row its own stats) and as a plain copy (y = x, checked against x), the
    last two also with the chunk waits free of Gluon's CTA barrier, then
    the rows fed by TMA instead of cp.async (experimental_tma_rows.py; aligned 256-multiple rows only, so not at
    33508), and through the flat view of contiguous rows of any width (experimental_tma_flat.py: also random0's
    1723 x 25249), beside the planned launch, one CTA an SM. The TMA trials come last: a wrong barrier phase would
    hang the process, and the stage's box would then cost only them."""
    n_sm = torch.cuda.get_device_properties(device).multi_processor_count
    tma_trials: list[Trial] = []
    for m, n in ((2048, 32768), (1991, 33508)):
        x, y, ref, moved, planned = softmax_inputs(m, n, 4.0, dtype, device)
        yield planned
        words = torch.zeros(m * 8, dtype=torch.int64, device=device)
        for warps in (16, 32):
            for mode, local, copy, free in (("words", False, False, False), ("local", True, False, False),
                                            ("copy", True, True, False), ("local free", True, False, True),
                                            ("copy free", True, True, True)):
                launch = partial(cluster_resident, x, y, words, 1, warps, n_sm, local, copy, free)
                label = f"{mode} warps={warps} ctas={n_sm}"
                if close_twice(launch, y, x if copy else ref, f"softmax.pipeline {m}x{n} {label}"):
                    yield ("softmax.pipeline", (m, n), label, launch, moved, False)
        if n % LANES == 0:
            tma_trials += [("softmax.pipeline", (m, n), f"tma boxes={boxes} warps={warps} ctas={n_sm}",
                            partial(tma_rows, x, y, warps, n_sm, boxes), moved, False)
                           for warps in (16, 32) for boxes in (1, 4)]
            tma_checks = (x, y, ref)
    x, y, ref = tma_checks
    for trial in tma_trials:
        if close_twice(trial[3], y, ref, f"softmax.pipeline {trial[1][0]}x{trial[1][1]} {trial[2]}"):
            yield trial
    # Contiguous rows of any width through the flat view (experimental_tma_flat.py): random2's and random0's shapes,
    # and 32768 beside the aligned TMA rows above.
    for m, n in ((2048, 32768), (1991, 33508), (1723, 25249)):
        x, y, ref, moved, planned = softmax_inputs(m, n, 4.0, dtype, device)
        if n == 25249:
            yield planned
        for warps in (16, 8):
            label = f"tma flat warps={warps} ctas={n_sm}"
            launch = partial(tma_flat_rows, x, y, warps, n_sm)
            if close_twice(launch, y, ref, f"softmax.pipeline {m}x{n} {label}"):
                yield ("softmax.pipeline", (m, n), label, launch, moved, False)
